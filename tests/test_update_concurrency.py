"""update_ among threads and processes: readers never see a torn array, and one process writes a
file at a time (a second writer gets BlockingIOError, so no update is lost silently)."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import jax
import numpy as np
import pytest

import jask

REPO = Path(__file__).resolve().parents[1]
N = 1 << 20  # float32: 4 MiB, some 64 blocks per read under a 64 KB budget
UPDATES = 24


def test_reads_during_updates_see_one_version_whole(tmp_path, small_budget):
    small_budget("64KB")
    path = tmp_path / "p.npy"
    np.save(path, np.zeros(N, np.float32))
    p = jask.DiskArray.open(path, mode="r+")
    jitted_sum = jax.jit(jask.sum)
    updates_done = [0]
    finished = threading.Event()
    seen = {"eager sum": [], "jitted sum": [], "np.asarray": []}
    overlapped = [0]

    def update():
        try:
            for k in range(1, UPDATES + 1):
                p.update_(jask.full(p.shape, float(k)))
                updates_done[0] = k
        finally:
            finished.set()

    # Each read yields (low, high) of what it saw: a sum of N values k is N * k exactly.
    reads = {
        "eager sum": lambda: (float(jask.sum(p)) / N,) * 2,
        "jitted sum": lambda: (float(jitted_sum(p)) / N,) * 2,
        "np.asarray": lambda: (lambda a: (float(a.min()), float(a.max())))(np.asarray(p)),
    }

    def read(kind):
        last = False
        while not last:  # at least one read, however the threads are scheduled
            last = finished.is_set()
            before = updates_done[0]
            seen[kind].append(reads[kind]())
            overlapped[0] += updates_done[0] != before

    threads = [threading.Thread(target=read, args=(kind,)) for kind in reads]
    threads.append(threading.Thread(target=update))
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    written = set(range(UPDATES + 1))
    for kind, values in seen.items():
        assert values, kind
        for low, high in values:
            assert low == high and low in written, f"{kind} read a torn array: {low} .. {high}"
    assert float(np.asarray(p)[0]) == UPDATES
    print(f"{sum(map(len, seen.values()))} reads, {overlapped[0]} overlapped an update")


def child_env():
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )


# Opens the file r+ and waits, by lines on stdin: "free" frees the array, "exit" exits.
HOLDER = """
import gc, sys
import jask
jask.set_memory_budget("1MB", scratch_dir=sys.argv[2])
p = jask.DiskArray.open(sys.argv[1], mode="r+")
print("holding", flush=True)
for line in sys.stdin:
    if line.strip() == "free":
        del p
        gc.collect()
        print("freed", flush=True)
    else:
        break
"""


def test_a_second_process_opening_a_file_for_writing_gets_blocking_io_error(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.arange(8, dtype=np.float32))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(tmp_path / "scratch")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(BlockingIOError, match=f"process {holder.pid}") as error:
            jask.DiskArray.open(path, mode="r+")
        assert str(path) in str(error.value) and 'mode="r"' in str(error.value)
        # Readers take no lock.
        np.testing.assert_array_equal(np.asarray(jask.DiskArray.open(path)), np.arange(8))
        holder.stdin.write("free\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "freed\n"
        mine = jask.DiskArray.open(path, mode="r+")
        mine.update_(mine + 1.0)
        del mine
    finally:
        holder.communicate("exit\n", timeout=60)
    np.testing.assert_array_equal(np.load(path), np.arange(8) + 1.0)


INCREMENTS = """
import sys
import jask
jask.set_memory_budget("1MB", scratch_dir=sys.argv[2])
p = jask.DiskArray.open(sys.argv[1], mode="r+")
for _ in range(150):
    p.update_(p + 1.0)
"""


def test_two_processes_incrementing_one_after_the_other_lose_nothing(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.zeros(4, np.float32))
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "-c", INCREMENTS, str(path), str(tmp_path / "scratch")],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(path), np.full(4, 300.0))
