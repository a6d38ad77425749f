"""jask.stats(): exact bytes per op, blocks, stage times, the timeline, nesting and resets."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

N = 10_007  # not a multiple of any block size


@pytest.fixture
def x(small_budget):
    small_budget("4KB")  # many blocks per op
    return jask.DiskArray.from_numpy(np.arange(N, dtype=np.float32))


def test_a_sum_reads_each_byte_once(x):
    with jask.stats() as s:
        total = jnp.sum(x)
    np.testing.assert_allclose(float(total), np.arange(N, dtype=np.float32).sum(), rtol=1e-6)
    op = s.ops["sum"]
    assert (op.calls, op.bytes_read, op.bytes_written) == (1, 4 * N, 0)
    assert op.blocks > 10
    assert s.total.bytes_read == 4 * N
    assert op.wall_s > 0 and op.read_s > 0


def test_a_map_to_disk_writes_its_result(x):
    with jask.stats() as s:
        y = x * 2.0
    assert isinstance(y, jask.DiskArray) and y.dtype == jnp.float32
    op = s.ops["mul"]
    assert (op.bytes_read, op.bytes_written) == (4 * N, 4 * N)
    assert op.write_s > 0
    np.testing.assert_array_equal(np.asarray(y), np.arange(N, dtype=np.float32) * 2)


def test_matmul_and_conversions_are_named(small_budget):
    small_budget("64KB")
    a_np = np.ones((300, 70), np.float32)
    with jask.stats() as s:
        a = jask.DiskArray.from_numpy(a_np)
        b = jask.DiskArray.from_numpy(np.ones((70, 50), np.float32))
        c = jnp.matmul(a, b)
        out = np.asarray(c)
    np.testing.assert_array_equal(out, a_np @ np.ones((70, 50), np.float32))
    assert s.ops["from_numpy"].calls == 2
    assert s.ops["from_numpy"].bytes_written == a_np.nbytes + 70 * 50 * 4
    assert s.ops["matmul"].bytes_written == 300 * 50 * 4
    assert s.ops["matmul"].bytes_read >= a_np.nbytes + 70 * 50 * 4
    assert s.ops["to_numpy"].bytes_read == 300 * 50 * 4


def test_jitted_programs_count_their_engine_calls(x):
    with jask.stats() as s:
        value = jax.jit(lambda a: jnp.sum(a * a))(x)
    expected = (np.arange(N, dtype=np.float64) ** 2).sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    assert s.total.bytes_read == 4 * N
    assert s.total.calls == 1


def test_update_and_save_are_counted(x, tmp_path):
    target = jask.zeros((N,), jnp.float32)
    with jask.stats() as s:
        target.update_(x)
        x.save(tmp_path / "x.npy")
    # An update writes a whole new file (see OpStats): the old file's header is copied
    # into it and counted; a save writes only the array's bytes (its header is left out).
    size = os.path.getsize(target.path)
    assert s.ops["update_"].bytes_read == s.ops["update_"].bytes_written == size > 4 * N
    assert s.ops["save"].bytes_read == 4 * N
    assert s.ops["save"].bytes_written == 4 * N < os.path.getsize(tmp_path / "x.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), np.arange(N, dtype=np.float32))


def test_the_timeline_records_every_block(x):
    with jask.stats(timeline=True) as s:
        jnp.sum(x)
    events = s.timeline
    assert events and all(set(e) == {"stage", "op", "start", "end", "bytes"} for e in events)
    reads = [e for e in events if e["stage"] == "read"]
    computes = [e for e in events if e["stage"] == "compute"]
    assert len(reads) == len(computes) == s.ops["sum"].blocks
    assert sum(e["bytes"] for e in reads) == 4 * N
    assert all(e["op"] == "sum" and 0 <= e["start"] <= e["end"] for e in events)
    assert s.timeline_dropped == 0
    # Recorded only inside the block.
    jnp.sum(x)
    assert len(s.timeline) == len(events)


def test_contexts_nest_but_timelines_do_not(x):
    with jask.stats() as outer:
        jnp.sum(x)
        with jask.stats() as inner:
            jnp.max(x)
    assert set(inner.ops) == {"max"}
    assert {"sum", "max"} <= set(outer.ops)
    with jask.stats(timeline=True):
        with pytest.raises(RuntimeError, match="timeline=True"):
            with jask.stats(timeline=True):
                pass


def test_totals_since_reset_and_the_table(x):
    jask.reset_stats()
    jnp.sum(x)
    s = jask.stats()
    assert s.ops["sum"].bytes_read == 4 * N and s.ops["sum"].calls == 1
    jnp.sum(x)
    assert s.ops["sum"].calls == 1  # a snapshot: fixed when taken
    assert jask.stats().ops["sum"].calls == 2
    text = str(s)
    assert "sum" in text and "total" in text and "39.1 KiB" in text and "peak memory" in text
    assert 0 < s.blocks_peak <= jask.memory_stats()["blocks_peak"]
    assert s.rss_peak > 0
    with jask.stats(), pytest.raises(RuntimeError, match="reset_stats"):
        jask.reset_stats()


def test_a_with_blocks_peak_is_the_peak_inside_it(small_budget):
    """A big op before the block, a small one inside: the block's peak is the small one's; the
    process-wide peak (memory_stats, a snapshot) still has the big one."""
    small_budget("4MB")
    jask.reset_memory_peak()
    big = jask.DiskArray.from_numpy(np.ones(1 << 20, np.float32))
    assert float(jnp.sum(big * 2.0)) == 2.0 * (1 << 20)
    big_peak = jask.memory_stats()["blocks_peak"]
    small_budget("64KB")
    small = jask.DiskArray.from_numpy(np.ones(1000, np.float32))
    with jask.stats() as outer:
        with jask.stats() as inner:
            assert float(jnp.sum(small)) == 1000.0
        assert 0 < inner.blocks_peak <= outer.blocks_peak
    with jask.stats() as alone:
        assert float(jnp.sum(small)) == 1000.0
    assert 0 < alone.blocks_peak <= 64 << 10 < big_peak
    assert inner.blocks_peak == alone.blocks_peak  # the same op, the same blocks
    assert outer.blocks_peak < big_peak
    assert jask.stats().blocks_peak == jask.memory_stats()["blocks_peak"] == big_peak
    assert alone.rss_peak > 0


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="takes True or False, got 'no'"):
        jask.stats(timeline="no")
    with pytest.raises(RuntimeError, match="was not entered"):
        jask.stats().__exit__(None, None, None)
    with jask.stats() as s:  # the failed exit above left nothing open
        pass
    jask.reset_stats()
    assert s.total.calls == 0
    with pytest.raises(TypeError, match="True or False, got 'false'"):
        jask.set_progress("false")
