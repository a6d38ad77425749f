"""The readahead of row loops (src/engine/storage/readahead.hpp): a loop of `jask.rows` reads, eager
or jitted with a traced start, gets the next rows from a window read while it computed; values and
dtypes are exactly NumPy's, an update_ in the middle of the loop is seen at once (rename-based and
in place through the journal), and the window stays within the budget."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _engine

ROWS, COLS, BATCH = 3001, 37, 100  # rows of 148 bytes: never page-aligned


@pytest.fixture(autouse=True)
def readahead_on():
    """On by default; a test that turns it off gets it back on."""
    _engine.set_readahead(True)
    yield
    _engine.set_readahead(True)


def stats():
    started, served, dropped, held = _engine.readahead_stats()
    return {"started": started, "served": served, "dropped": dropped, "held": held}


def walk(x, read):
    """Every batch of BATCH rows in order (the last one clamped, as lax.dynamic_slice is)."""
    return [np.asarray(read(x, i * BATCH)) for i in range(-(-x.shape[0] // BATCH))]


def expected_batches(x_np):
    n = x_np.shape[0]
    return [x_np[min(i * BATCH, n - BATCH) :][:BATCH] for i in range(-(-n // BATCH))]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, jnp.bfloat16])
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_row_loop_is_served_ahead_with_numpys_values(rng, dtype, jitted):
    x_np = rng.uniform(-50, 50, (ROWS, COLS)).astype(dtype)
    x = jask.DiskArray.from_numpy(x_np)
    read = lambda x, start: jask.rows(x, start, BATCH)  # noqa: E731
    if jitted:
        read = jax.jit(read)
    before = stats()
    got = walk(x, read)
    for g, want in zip(got, expected_batches(x_np), strict=True):
        assert g.dtype == x_np.dtype
        np.testing.assert_array_equal(g, want)
    served = stats()["served"] - before["served"]
    assert served >= len(got) - 4  # every read after the first two (the clamped last one aside)


def test_dynamic_slices_in_a_jitted_loop_are_served_ahead(rng):
    """lax.dynamic_slice_in_dim over the leading axis inside jax.lax.fori_loop (x a constant of
    the loop): each iteration's engine call reads the rows the last one's window holds."""
    x_np = rng.uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    batches = ROWS // BATCH

    @jax.jit
    def total(x):
        def body(i, acc):
            rows = jax.lax.dynamic_slice_in_dim(x, i * BATCH, BATCH, axis=0)
            return acc + jnp.sum(rows * rows, axis=0)

        return jax.lax.fori_loop(0, batches, body, jnp.zeros(COLS, jnp.float32))

    before = stats()
    got = np.asarray(total(x))
    assert stats()["served"] - before["served"] >= batches - 2
    want = np.zeros(COLS, np.float32)
    for i in range(batches):
        want = want + np.sum(np.square(x_np[i * BATCH : (i + 1) * BATCH]), axis=0)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_readahead_off_reads_every_range_from_the_file(rng):
    x_np = rng.uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    _engine.set_readahead(False)
    before = stats()
    got = walk(x, lambda x, start: jask.rows(x, start, BATCH))
    assert stats()["started"] == before["started"] and stats()["held"] == 0
    for g, want in zip(got, expected_batches(x_np), strict=True):
        np.testing.assert_array_equal(g, want)


def test_update_in_the_middle_of_the_loop_is_never_served_stale(rng, tmp_path):
    x_np = rng.uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    np.save(tmp_path / "x.npy", x_np)
    x = jask.DiskArray.open(str(tmp_path / "x.npy"), mode="r+")
    for i in range(3):
        np.testing.assert_array_equal(
            np.asarray(jask.rows(x, i * BATCH, BATCH)), x_np[i * BATCH :][:BATCH]
        )
    assert stats()["held"] > 0  # rows 300-399 wait in the window
    new = x_np * 2 + 1
    x.update_(jask.DiskArray.from_numpy(new))
    np.testing.assert_array_equal(np.asarray(jask.rows(x, 3 * BATCH, BATCH)), new[300:400])
    np.testing.assert_array_equal(np.asarray(jask.rows(x, 4 * BATCH, BATCH)), new[400:500])


def test_update_in_place_of_a_container_file_is_never_served_stale(rng, tmp_path):
    """A raw file of two arrays, the second updated in place through the journal."""
    a_np = rng.uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    path = tmp_path / "two.bin"
    path.write_bytes(np.zeros(ROWS * COLS, np.float32).tobytes() + a_np.tobytes())
    threshold = _engine.in_place_update_threshold()
    _engine.set_in_place_update_threshold(0)
    try:
        x = jask.DiskArray.open(
            str(path), shape=(ROWS, COLS), dtype=np.float32, offset=a_np.nbytes, mode="r+"
        )
        for i in range(3):
            np.testing.assert_array_equal(
                np.asarray(jask.rows(x, i * BATCH, BATCH)), a_np[i * BATCH :][:BATCH]
            )
        new = a_np - 3
        x.update_(jask.DiskArray.from_numpy(new))
        np.testing.assert_array_equal(np.asarray(jask.rows(x, 3 * BATCH, BATCH)), new[300:400])
    finally:
        _engine.set_in_place_update_threshold(threshold)


def test_the_window_stays_within_the_budget(rng, small_budget):
    small_budget("256KB")
    x_np = rng.uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    jask.reset_memory_peak()
    before = stats()
    got = walk(x, lambda x, start: jask.rows(x, start, BATCH))  # windows of 14.8 KB
    assert stats()["served"] > before["served"]
    assert stats()["held"] <= 256_000 // 2
    assert jask.memory_stats()["blocks_peak"] <= 256_000
    for g, want in zip(got, expected_batches(x_np), strict=True):
        np.testing.assert_array_equal(g, want)
    y = jnp.sum(x)  # another call: the window's budget comes back
    assert stats()["held"] == 0
    np.testing.assert_allclose(float(y), float(np.sum(x_np, dtype=np.float64)), rtol=1e-5)


# Reads three batches of a loop (the window then holds the next rows), forks, and prints
# what the child holds and reads, then whether the parent's next batch is served ahead.
FORK_WITH_A_WINDOW = r"""
import os, signal, sys, time
import numpy as np
import jask
from jask import _engine

ROWS, COLS, BATCH = (int(a) for a in sys.argv[1:4])
x_np = np.random.default_rng(5).uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
x = jask.DiskArray.from_numpy(x_np)
for i in range(3):
    assert np.array_equal(np.asarray(jask.rows(x, i * BATCH, BATCH)), x_np[i * BATCH :][:BATCH])
print("parent holds", _engine.readahead_stats()[3] > 0, flush=True)
pid = os.fork()
if pid == 0:
    held = _engine.readahead_stats()[3]
    rows = np.asarray(jask.rows(x, 3 * BATCH, BATCH))
    print("child holds", held, rows.dtype, np.array_equal(rows, x_np[300:400]), flush=True)
    os._exit(0)
deadline = time.monotonic() + 60
while os.waitpid(pid, os.WNOHANG) == (0, 0):
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("child hung", flush=True)
        break
    time.sleep(0.02)
served = _engine.readahead_stats()[1]
rows = np.asarray(jask.rows(x, 3 * BATCH, BATCH))
print("parent served", _engine.readahead_stats()[1] - served, np.array_equal(rows, x_np[300:400]))
"""


def test_a_forked_child_drops_the_window_and_reads_the_file():
    """fork() copies the window's parts but not the threads reading them: the child holds
    none of them (it never waits for their readers) and reads its rows from the file; the
    parent's loop goes on from its window."""
    import subprocess
    import sys

    code = [
        sys.executable,
        "-W",
        "ignore",
        "-c",
        FORK_WITH_A_WINDOW,
        str(ROWS),
        str(COLS),
        str(BATCH),
    ]
    out = subprocess.run(code, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "parent holds True",
        "child holds 0 float32 True",
        "parent served 1 True",
    ], out.stdout + out.stderr
