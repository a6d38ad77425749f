"""update_ is crash-consistent: a SIGKILL at any moment leaves all old or all new values on disk."""

import os
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import numpy as np

import jask

REPO = Path(__file__).resolve().parents[1]
ELEMENTS = 4 << 20  # float32: a 16 MiB file, dozens of blocks per update under a 1 MB budget
RUNS = 10
CONCURRENT_RUNS = 5  # children start slowly (importing JAX); overlapping them keeps the test short
MAX_KILL_DELAY_S = 1.0

# Rewrites the file with k = 1, 2, ... (every element k), printing k once update_ has returned.
CHILD = """
import sys
import jask
path, scratch = sys.argv[1], sys.argv[2]
jask.set_memory_budget("1MB", scratch_dir=scratch)
p = jask.DiskArray.open(path, mode="r+")
k = 0
while True:
    k += 1
    p.update_(jask.full(p.shape, float(k)))
    print(k, flush=True)
"""


def replacement_files(path):
    return sorted(path.parent.glob(path.name + ".jask-tmp-*"))


def child_env(**extra):
    """The environment of a child process that imports this checkout's Jask."""
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        **extra,
    )


def run_until_crash_point(child_code, point, *args) -> None:
    """Runs `python -c child_code *args` with JASK_TEST_CRASH_AT=point; the engine SIGKILLs the
    child there (asserted: a child that failed or finished instead is an error)."""
    child = subprocess.run(
        [sys.executable, "-c", child_code, *map(str, args)],
        capture_output=True,
        text=True,
        env=child_env(JASK_TEST_CRASH_AT=point),
        timeout=120,
    )
    assert child.returncode == -9, (point, child.returncode, child.stdout, child.stderr)


def kill_after_first_line(argv, delay, env=None) -> list[int]:
    """Runs `argv`, a child that prints 1, 2, ... (one a line) as it goes, and SIGKILLs it
    `delay` s after its first line; returns the numbers it printed.

    Timing from the first line on leaves out the child's start (importing JAX, first trace),
    which is slow and varies with the machine's load.
    """
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env if env is not None else child_env(),
    )
    first = child.stdout.readline()
    if first != "1\n":
        child.kill()
        raise AssertionError(f"child did not start: {first!r} {child.communicate()[1]}")
    time.sleep(delay)
    child.kill()
    out, err = child.communicate(timeout=60)
    assert child.returncode == -9, (child.returncode, err)  # killed, not failed
    return [1] + [int(line) for line in out.split()]


def kill_during_updates(folder, delay):
    """Starts a child updating folder/a.npy in a loop; SIGKILLs it `delay` s after its first
    update."""
    folder.mkdir()
    path = folder / "a.npy"
    np.save(path, np.zeros(ELEMENTS, np.float32))
    finished = kill_after_first_line(
        [sys.executable, "-c", CHILD, str(path), str(folder / "scratch")], delay
    )
    data = np.load(path)
    return dict(
        path=path,
        finished=finished[-1],
        low=float(data.min()),
        high=float(data.max()),
        leftovers=replacement_files(path),
        delay=delay,
    )


def check_after_kill(run, where):
    """The file holds one update's values, all of them, and reopening it removes the dead
    child's temp file."""
    assert run["low"] == run["high"], (
        f"{where}: torn file, values from {run['low']} to {run['high']}"
    )
    # Update k+1 may have been renamed into place before the child could print k+1.
    assert run["low"] in (run["finished"], run["finished"] + 1), (
        f"{where}: file holds {run['low']}, but update {run['finished']} had finished"
    )
    reopened = jask.DiskArray.open(run["path"], mode="r+")
    assert replacement_files(run["path"]) == [], where
    assert float(np.asarray(reopened)[-1]) == run["low"], where
    del reopened
    shutil.rmtree(run["path"].parent)


def test_sigkill_during_update_leaves_all_old_or_all_new_values(tmp_path):
    # Kills at arbitrary moments. Where each lands depends on the machine's speed, so the test
    # asserts only what holds wherever it lands; the kills at exact steps are the next test's.
    seed = 1234
    delays = [random.Random(seed + i).uniform(0, MAX_KILL_DELAY_S) for i in range(RUNS)]
    with ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
        runs = list(
            pool.map(kill_during_updates, [tmp_path / f"run{i}" for i in range(RUNS)], delays)
        )
    for i, run in enumerate(runs):
        check_after_kill(run, f"run {i} (killed {run['delay']:.3f} s after update 1)")
    print(f"{sum(bool(run['leftovers']) for run in runs)} of {RUNS} kills landed inside an update")


# Each point of update_'s replacement path, and the values the file must hold after a kill there:
# the old (0) until the rename, the new (1) from it on. A temp file is left until the rename.
CRASH_POINTS = {
    "replace_half_written": (0.0, True),  # the first block of the new file written
    "replace_staged": (0.0, True),  # the new file written and flushed, not yet renamed
    "replace_renamed": (1.0, False),  # renamed into place, its folder not yet flushed
}


def killed_at(folder, point):
    folder.mkdir()
    path = folder / "a.npy"
    np.save(path, np.zeros(ELEMENTS, np.float32))
    run_until_crash_point(CHILD, point, path, folder / "scratch")
    data = np.load(path)
    return dict(
        path=path, low=float(data.min()), high=float(data.max()), leftovers=replacement_files(path)
    )


def test_sigkill_at_each_step_of_update_leaves_all_old_or_all_new_values(tmp_path):
    folders = [tmp_path / point for point in CRASH_POINTS]
    with ThreadPoolExecutor(len(CRASH_POINTS)) as pool:
        runs = list(pool.map(killed_at, folders, CRASH_POINTS))
    for (point, (value, leftover)), run in zip(CRASH_POINTS.items(), runs):
        assert (run["low"], run["high"]) == (value, value), (point, run)
        assert bool(run["leftovers"]) == leftover, (point, run["leftovers"])
        # The update killed at `point` is the child's first: it finished none.
        check_after_kill(dict(run, finished=0), point)


def test_update_swaps_in_a_new_file_that_jitted_functions_see_without_retracing(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.zeros((64, 8), np.float32))
    path.chmod(0o640)
    p = jask.DiskArray.open(path, mode="r+")
    handle, inode = p.handle, path.stat().st_ino
    traces = []

    @jax.jit
    def total(x):
        traces.append(1)
        return jask.sum(x)

    assert float(total(p)) == 0.0
    for k in range(1, 4):
        assert p.update_(jask.full(p.shape, float(k))) is p
        assert float(total(p)) == k * 64 * 8
        np.testing.assert_array_equal(np.load(path), np.full((64, 8), k, np.float32))
    assert len(traces) == 1
    assert (p.handle, p.path, p.shape, p.dtype) == (handle, str(path), (64, 8), np.float32)
    assert path.stat().st_ino != inode  # replaced by rename, not overwritten in place
    assert path.stat().st_mode & 0o777 == 0o640
    assert replacement_files(path) == []


def test_update_keeps_the_bytes_around_a_raw_array(tmp_path):
    path = tmp_path / "raw.bin"
    payload = np.arange(1000, dtype=np.float32)
    path.write_bytes(b"prefix" * 10 + payload.tobytes() + b"suffix" * 7)
    x = jask.DiskArray.open(path, shape=(1000,), dtype="float32", offset=60, mode="r+")
    x.update_(x * 2.0)
    raw = path.read_bytes()
    assert raw[:60] == b"prefix" * 10 and raw[-42:] == b"suffix" * 7
    np.testing.assert_array_equal(np.frombuffer(raw[60:-42], np.float32), payload * 2.0)
    np.testing.assert_array_equal(np.asarray(x), payload * 2.0)


def test_opening_for_writing_removes_temp_files_of_dead_processes_only(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.zeros(4, np.float32))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"a.npy.jask-tmp-{dead.pid}-0badf00d"
    live = tmp_path / f"a.npy.jask-tmp-{os.getpid()}-0badf00d"
    unrelated = tmp_path / f"b.npy.jask-tmp-{dead.pid}-0badf00d"
    for f in (stale, live, unrelated):
        f.write_bytes(b"partial")
    jask.DiskArray.open(path)  # read-only: leaves them
    assert stale.exists()
    jask.DiskArray.open(path, mode="r+")
    assert not stale.exists() and live.exists() and unrelated.exists()
