"""Random-row gathers from a large file on disk, from a cold page cache: Jask's `x[idx]`, NumPy memmap
fancy indexing (`X_mm[np.sort(idx)]`) and the raw disk (fio randread at the same request size,
several requests in flight), side by side in one run.

W6 gathers 1024 random rows of 1 KiB (256 float32) per training step, W8 4096 rows of 512 B (128
float32). Each trial draws fresh indices, evicts the file from the page cache (fsync +
POSIX_FADV_DONTNEED, as bench/harness.py does) and times one gather; the contenders take turns
trial by trial, so load on a shared machine hits them alike. Values are checked against NumPy.

    python -m bench.gather_rows [--folder DIR] [--gib 4] [--row-floats 256] [--rows 1024]
                                [--trials 10] [--fio-depth 32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

import jask
from jask import _engine

from .harness import evict


def make_table(path: Path, rows: int, cols: int) -> None:
    """A float32 .npy of `rows` x `cols`, row r all float32(r), written in 64 MiB chunks."""
    if path.exists():
        return
    partial = path.with_suffix(".partial")
    out = np.lib.format.open_memmap(partial, "w+", np.float32, (rows, cols))
    step = max(1, (64 << 20) // (4 * cols))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop] = np.arange(start, stop, dtype=np.float64).astype(np.float32)[:, None]
    out.flush()
    del out
    os.replace(partial, path)


def fio_randread(path: Path, block: int, depth: int, seconds: float) -> float | None:
    """Random reads per second of `block` bytes at queue depth `depth` (io_uring, direct), or None
    without fio."""
    if shutil.which("fio") is None:
        return None
    cmd = [
        "fio",
        "--name=randread",
        f"--filename={path}",
        "--rw=randread",
        f"--bs={block}",
        f"--iodepth={depth}",
        "--ioengine=io_uring",
        "--direct=1",
        f"--runtime={seconds}",
        "--time_based",
        "--output-format=json",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(json.loads(result.stdout)["jobs"][0]["read"]["iops"])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.gather_rows", description=__doc__)
    p.add_argument("--folder", default="build/bench-data", help="where the table lives (not tmpfs)")
    p.add_argument("--gib", type=float, default=4.0, help="size of the table")
    p.add_argument("--row-floats", type=int, default=256, help="float32s per row (256: 1 KiB)")
    p.add_argument("--rows", type=int, default=1024, help="rows per gather")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--fio-depth", type=int, default=32)
    args = p.parse_args(argv)

    cols = args.row_floats
    n = int(args.gib * (1 << 30)) // (4 * cols)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gather-table-{n}x{cols}.npy"
    make_table(path, n, cols)
    jask.set_memory_budget(256 << 20)
    x = jask.DiskArray.open(str(path), mode="r")
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {"jask": [], "numpy": []}
    for trial in range(args.trials):
        idx = rng.choice(n, args.rows, replace=False).astype(np.int64)
        for name in ("jask", "numpy") if trial % 2 == 0 else ("numpy", "jask"):
            evict([str(path)])
            start = time.perf_counter()
            if name == "jask":
                got = np.asarray(x[idx])
            else:
                mm = np.load(path, mmap_mode="r")
                got = mm[np.sort(idx)]
                del mm
            times[name].append(time.perf_counter() - start)
            want = np.sort(idx) if name == "numpy" else idx
            expected = np.broadcast_to(want.astype(np.float32)[:, None], got.shape)
            assert got.dtype == np.float32 and np.array_equal(got, expected), name
    row_bytes = 4 * cols
    request = max(4096, -(-row_bytes // 4096) * 4096)  # the pages a row's read reaches
    evict([str(path)])
    iops = fio_randread(path, request, args.fio_depth, 5.0)
    print(
        f"table {path.name}: {n} rows of {row_bytes} B ({n * row_bytes / (1 << 30):.1f} GiB), "
        f"{args.rows} random rows per gather, cold page cache, {args.trials} trials each, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    for name, label in (("jask", "Jask x[idx]"), ("numpy", "NumPy memmap X_mm[np.sort(idx)]")):
        t = statistics.median(times[name])
        print(
            f"  {label:34s} median {t * 1e3:7.1f} ms  ({args.rows / t:9.0f} rows/s; "
            f"runs {' '.join(f'{s * 1e3:.0f}' for s in times[name])} ms)"
        )
    if iops is not None:
        print(
            f"  {'raw disk (fio randread, direct)':34s} {iops:9.0f} reads/s of {request} B at "
            f"depth {args.fio_depth}: {args.rows / iops * 1e3:.1f} ms for {args.rows} rows"
        )
    print(f"  Jask's engine I/O so far: {_engine.io_counters()}")


if __name__ == "__main__":
    main()
