"""Progress bars: shown for calls past the threshold (0 here), named after the op, ending
at 100%; none when turned off. The poller thread is paused in these tests: bars are drawn
by _progress._flush() (and by a running call's snapshot handed to the bars by hand), so
nothing depends on when that thread runs."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _engine, _progress

N = 20_011


@pytest.fixture
def bars(small_budget):
    """Bars for every call (threshold 0), many blocks per call; state restored after."""
    small_budget("4KB")
    was_enabled, was_threshold = jask.progress_enabled(), _progress._threshold_s
    _progress._flush()  # bars of calls before the test are drawn before capture
    jask.set_progress(True)
    _progress._threshold_s = 0.0
    with _progress._poller_paused():
        yield
        _progress._flush()
    _progress._threshold_s = was_threshold
    jask.set_progress(was_enabled)


def bar_lines(text: str, name: str) -> list[str]:
    return [line for line in text.replace("\r", "\n").splitlines() if line.startswith(name + ":")]


def test_an_eager_op_gets_a_bar_ending_at_100(bars, capsys):
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jnp.sum(x)) == N
    _progress._flush()
    lines = bar_lines(capsys.readouterr().err, "sum")
    assert lines and "100%" in lines[-1]
    assert "78.2k" in lines[-1]  # 4 * N bytes, in KiB


def test_a_jitted_program_gets_a_bar_ending_at_100(bars, capsys):
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jax.jit(lambda a: jnp.sum(a * 3.0))(x)) == 3 * N
    _progress._flush()
    lines = bar_lines(capsys.readouterr().err, "jit: mul+sum")
    assert lines and "100%" in lines[-1]


@pytest.fixture
def created(monkeypatch):
    """The bars opened: (desc, bar) pairs."""
    made = []
    new_bar = _progress._new_bar

    def recording(desc, *args, **kwargs):
        bar = new_bar(desc, *args, **kwargs)
        made.append((desc, bar))
        return bar

    monkeypatch.setattr(_progress, "_new_bar", recording)
    return made


def test_a_jitted_programs_run_gets_one_bar_for_all_its_calls(bars, created):
    x = jask.DiskArray.from_numpy(np.arange(N, dtype=np.float32))
    w = jask.DiskArray.from_numpy(np.ones((N, 3), np.float32))
    f = jax.jit(lambda a, b: (jnp.sum(a * 3.0), a @ b))
    runs_before = _progress._last_run_seq()
    with jask.stats() as s:
        for _ in range(2):
            total, product = jax.block_until_ready(f(x, w))
    _progress._flush()
    expected = np.arange(N, dtype=np.float64)
    np.testing.assert_allclose(float(total), 3 * expected.sum(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(product), np.tile(expected.sum(), 3), rtol=1e-5)
    calls_per_run = s.total.calls // 2
    assert calls_per_run >= 2 and s.total.calls == 2 * calls_per_run
    jit_bars = [(desc, bar) for desc, bar in created if desc.startswith("jit: ")]
    assert len(jit_bars) == 2, created  # one per run, none per call
    assert all(desc.startswith("jit: ") or desc == "from_numpy" for desc, _ in created), created
    for _, bar in jit_bars:
        assert bar.total is not None and bar.n == bar.total > 0  # closed at 100%
    first, second = _engine.finished_program_runs(runs_before)[-2:]
    assert first["calls_done"] == second["calls_done"] == calls_per_run
    # XLA compiled a straight-line program: its first run already knew its count
    assert first["expected_calls"] == second["expected_calls"] == calls_per_run
    assert first["expected_bytes"] == 0 and second["expected_bytes"] == first["bytes"] > 0
    assert 2 * first["bytes"] == s.total.bytes_read + s.total.bytes_written


def test_a_program_with_a_loop_ends_its_bar_on_the_next_call(bars, created):
    """Calls in a loop: the first run's count is not known, so its run ends when another
    call starts (or it is idle); the second run knows the first's."""
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))

    def three_sums(a):
        body = lambda carry, _: (carry + jnp.sum(a * 2.0), None)  # noqa: E731
        return jax.lax.scan(body, jnp.float32(0.0), length=3)[0]

    f = jax.jit(three_sums)
    runs_before = _progress._last_run_seq()
    assert float(f(x)) == 6.0 * N
    assert float(jnp.sum(x)) == N  # an eager call ends the run
    assert float(f(x)) == 6.0 * N
    _progress._flush()
    runs = _engine.finished_program_runs(runs_before)
    assert [r["calls_done"] for r in runs] == [3, 3]
    assert [r["expected_calls"] for r in runs] == [0, 3]
    assert sum(desc.startswith("jit: ") for desc, _ in created) == 2
    assert sum(desc == "sum" for desc, _ in created) == 1


def test_a_running_calls_bar_opens_and_follows_its_bytes(bars, created):
    """What the poller does with wait_for_call's snapshot of a call still running: the bar
    opens at the bytes done, its total projected from the blocks read, and follows them;
    the call's end closes it at its exact total."""
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    _progress._flush()
    created.clear()
    seq = _engine.last_call_seq() + 1  # the next call's
    start_ns = _engine.stats_clock_ns() - 10**9
    running = (seq, "sum", start_ns, 0, 2, 2, 8, 4096, 0, False)  # 2 of 8 blocks read: 4 KiB
    with _progress._lock:
        _progress._BARS.update(running)
        ((desc, bar),) = created
        assert (desc, bar.n, bar.total) == ("sum", 4096, 4 * 4096)
        _progress._BARS.update((seq, "sum", start_ns, 0, 6, 5, 8, 12_000, 0, False))
        assert (bar.n, bar.total) == (12_000, 16_000)
    total = jnp.sum(x)  # the call the snapshots stood for
    # Its bar ended before the call returned (not at the poller's next look, after what the
    # caller prints next), at the call's exact bytes.
    assert _progress._BARS.bar is None and bar.disable  # closed
    assert bar.n == bar.total == 4 * N
    assert float(total) == N
    assert _engine.last_call_seq() == seq
    _progress._flush()
    assert len(created) == 1


@pytest.fixture
def truncated(tmp_path):
    """A DiskArray of N float32 ones whose file is then cut short: reading its end fails."""
    path = tmp_path / "cut.npy"
    np.save(path, np.ones(N, np.float32))
    x = jask.DiskArray.open(path)
    os.truncate(path, 40_000)
    return x


def test_a_failed_calls_bar_stays_where_it_failed_marked_failed(bars, created, truncated):
    seq = _engine.last_call_seq() + 1
    start_ns = _engine.stats_clock_ns() - 10**9
    with _progress._lock:
        _progress._BARS.update((seq, "sum", start_ns, 0, 2, 2, 8, 4096, 0, False))
    ((desc, bar),) = created
    with pytest.raises(OSError, match="unexpected end of file"):
        jnp.sum(truncated)
    (failed,) = _engine.finished_calls(seq - 1)
    assert failed[-1] is True  # the engine's record says it failed
    assert _progress._BARS.bar is None and bar.disable  # closed as the call raised
    assert bar.n == 4096 < bar.total  # not drawn at 100%
    assert bar.postfix == "failed"
    assert float(jnp.sum(jnp.ones(3))) == 3  # the next call: no bar left over
    _progress._flush()
    assert len(created) == 1


def test_a_failed_program_run_ends_there_and_its_bar_never_shows_100(bars, capsys, truncated):
    runs_before = _progress._last_run_seq()
    f = jax.jit(lambda a: jnp.sum(a * 3.0))
    with pytest.raises(jax.errors.JaxRuntimeError, match="unexpected end of file"):
        jax.block_until_ready(f(truncated))
    _progress._flush()
    (run,) = _engine.finished_program_runs(runs_before)
    assert run["failed"] and run["calls_done"] == 1
    assert not any("100%" in line for line in bar_lines(capsys.readouterr().err, "jit: mul+sum"))


def test_a_failed_save_tree_leaves_no_bar_at_100(bars, capsys, tmp_path, truncated):
    tree = {"a": jask.DiskArray.from_numpy(np.ones(N, np.float32)), "b": truncated}
    capsys.readouterr()
    with pytest.raises(OSError, match="unexpected end of file"):
        jask.save_tree(tmp_path / "ckpt", tree)
    lines = bar_lines(capsys.readouterr().err, "save_tree")
    assert not any("100%" in line for line in lines), lines


def test_runs_under_the_threshold_get_no_bar(bars, created):
    _progress._threshold_s = 1e9
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jax.jit(lambda a: jnp.sum(a * 3.0))(x)) == 3 * N
    assert float(jnp.sum(x)) == N
    _progress._flush()
    assert created == []


def test_save_tree_and_load_tree_get_one_bar_each(bars, capsys, tmp_path):
    tree = {"a": jask.DiskArray.from_numpy(np.ones(N, np.float32)), "b": np.zeros(3, np.int32)}
    jask.save_tree(tmp_path / "ckpt", tree)
    loaded = jask.load_tree(tmp_path / "ckpt")
    np.testing.assert_array_equal(np.asarray(loaded["a"]), np.ones(N, np.float32))
    err = capsys.readouterr().err
    for name in ("save_tree", "load_tree"):
        lines = bar_lines(err, name)
        assert lines and "100%" in lines[-1], (name, err)
        assert f"{(4 * N + 12) / 1024:.1f}k" in lines[-1]
    assert not bar_lines(err, "save")  # the leaves' calls share the task's bar


def test_no_bars_when_turned_off(bars, capsys):
    jask.set_progress(False)
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jnp.sum(x)) == N
    assert float(jax.jit(lambda a: jnp.sum(a * 3.0))(x)) == 3 * N
    _progress._flush()
    assert capsys.readouterr().err == ""


def test_the_environment_turns_them_off():
    import subprocess
    import sys

    code = "import jask; print(jask.progress_enabled())"
    env = {**os.environ, "JASK_PROGRESS": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# A process that forks while its progress thread waits in the engine; the child runs 20
# eager ops, each once its own progress thread waits in the engine (each op wakes it).
# Prints the child's sum, or "hung" when the child has not ended within 60 s.
FORK_WHILE_WAITING = r"""
import os, signal, time
import numpy as np
import jax.numpy as jnp
import jask
from jask import _engine

def waiter_in_engine():
    deadline = time.monotonic() + 30
    while _engine.call_waiters() < 1:
        assert time.monotonic() < deadline, "no progress thread waits in the engine"
        time.sleep(0.01)

x = jask.DiskArray.from_numpy(np.arange(1000, dtype=np.float32))
float(jnp.sum(x))
waiter_in_engine()
pid = os.fork()
if pid == 0:
    total = 0.0
    for _ in range(20):  # each op wakes the waiting progress thread
        time.sleep(0.3)  # the thread has drawn the last op's bar (the bug shows more often)
        waiter_in_engine()
        total += float(jnp.sum(x * 2))
    print("child", total, flush=True)
    os._exit(0)
deadline = time.monotonic() + 60
while os.waitpid(pid, os.WNOHANG) == (0, 0):
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("hung", flush=True)
        break
    time.sleep(0.05)
print("parent", float(jnp.sum(x)), flush=True)
"""


def test_a_child_forked_while_the_progress_thread_waits_runs_ops():
    """fork() copies the engine's wait of the parent's progress thread, but not the thread:
    without the engine's fork handlers the child's first call waits for it forever."""
    import subprocess
    import sys

    env = {**os.environ, "JASK_PROGRESS": "1"}
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", FORK_WHILE_WAITING],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["child 19980000.0", "parent 499500.0"], (
        out.stdout + out.stderr
    )
