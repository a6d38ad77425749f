"""What update_ of one array of a large container file costs: in place through the journal, and by
renaming a new copy of the whole file over it (the path small files keep).

A raw file of ARRAYS float32 arrays of MIB MiB each, back to back after a 1000-byte prefix (like a
safetensors shard: not 4096-aligned), and one array in the middle updated from a DiskArray made
beforehand. Both ways run in the same process, alternately, REPEAT times each; the rename way is
forced by raising the in-place threshold above the file's size. Bytes are Jask's I/O counters
(every read and write the engine makes, both directions) and the process's write(2) bytes
(/proc/self/io wchar).

    python -m bench.update_in_place [--folder DIR] [--arrays 32] [--mib 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import jask
from jask import _engine

PREFIX = 1000


def written_bytes() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def make_container(path: Path, arrays: int, n: int) -> None:
    with open(path, "wb") as f:
        f.write(b"h" * PREFIX)
        for i in range(arrays):
            f.write(np.full(n, float(i), np.float32).tobytes())
        f.flush()
        os.fsync(f.fileno())


def one_update(x, new, threshold: int) -> dict:
    _engine.set_in_place_update_threshold(threshold)
    moved, wchar = sum(_engine.io_counters()), written_bytes()
    start = time.perf_counter()
    x.update_(new)
    seconds = time.perf_counter() - start
    return dict(
        seconds=seconds,
        moved=sum(_engine.io_counters()) - moved,
        wchar=written_bytes() - wchar,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default=None, help="where the file goes (a disk, not tmpfs)")
    parser.add_argument("--arrays", type=int, default=32)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", default="256MB")
    args = parser.parse_args()
    n = args.mib * (1 << 20) // 4
    with tempfile.TemporaryDirectory(dir=args.folder or "/var/tmp") as folder:
        folder = Path(folder)
        jask.set_memory_budget(args.budget, scratch_dir=folder / "scratch")
        path = folder / "shard.bin"
        make_container(path, args.arrays, n)
        middle = args.arrays // 2
        offset = PREFIX + middle * n * 4
        x = jask.DiskArray.open(path, shape=(n,), dtype="float32", offset=offset, mode="r+")
        saved = _engine.in_place_update_threshold()
        ways = {"in place (journal)": saved, "rename (whole file)": 1 << 62}
        runs = {way: [] for way in ways}
        try:
            for k in range(args.repeat):
                for way, threshold in ways.items():
                    value = float(100 + len(runs[way]) + 10 * k)
                    new = jask.DiskArray.from_numpy(np.full(n, value, np.float32))
                    runs[way].append(one_update(x, new, threshold))
                    del new
                    check = np.asarray(x[::4096])
                    assert check.dtype == np.float32 and np.all(check == value), way
        finally:
            _engine.set_in_place_update_threshold(saved)
        other = np.memmap(path, np.float32, "r", PREFIX + (middle + 1) * n * 4, (n,))
        assert np.all(other[::4096] == middle + 1)  # the neighbour kept its bytes
        del other, x
    size = PREFIX + args.arrays * n * 4
    print(
        f"{args.arrays} float32 arrays of {args.mib} MiB in one raw file ({size / 2**30:.2f} GiB)"
    )
    print(f"update_ of one array, budget {args.budget}, {args.repeat} runs each way\n")
    print("| way | seconds per update | MiB moved by the engine | MiB written (wchar) |")
    print("|---|---|---|---|")
    for way, rs in runs.items():
        secs = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        moved = ", ".join(f"{r['moved'] / 2**20:.0f}" for r in rs)
        wchar = ", ".join(f"{r['wchar'] / 2**20:.0f}" for r in rs)
        print(f"| {way} | {secs} | {moved} | {wchar} |")


if __name__ == "__main__":
    main()
