"""safetensors in place: the time to open a file of many tensors, and update_ of one small tensor
in a small file and in a big one (what it costs depends on the file's size while update_ rewrites
the file; with an in-place journal it should not).

    python -m bench.safetensors_files --dir /var/tmp/jask-bench --tensors 1000 --big-mib 1024
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import safetensors.numpy

import jask


def best_ms(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        del result
    return 1000 * min(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="a folder on the disk to measure (removed)")
    parser.add_argument("--tensors", type=int, default=1000)
    parser.add_argument("--big-mib", type=int, default=1024, help="size of the big file")
    args = parser.parse_args(argv)
    os.makedirs(args.dir)
    try:
        jask.set_memory_budget("64MB", scratch_dir=os.path.join(args.dir, "scratch"))
        measure(args)
    finally:
        shutil.rmtree(args.dir)


def measure(args) -> None:
    many = os.path.join(args.dir, "many.safetensors")
    rng = np.random.default_rng(0)
    tensors = {
        f"layers.{i}.w": rng.standard_normal((17, 33)).astype(np.float32)
        for i in range(args.tensors)
    }
    safetensors.numpy.save_file(tensors, many)
    for mode in ("r", "r+"):
        ms = best_ms(lambda: jask.open_safetensors(many, mode=mode))  # noqa: B023
        print(f"open_safetensors of {args.tensors} tensors, mode={mode}: {ms:.1f} ms (best of 5)")

    small, big = (
        os.path.join(args.dir, "small.safetensors"),
        os.path.join(args.dir, "big.safetensors"),
    )
    tiny = np.ones((1024, 1024), np.float32)  # 4 MiB
    jask.save_safetensors(small, {"tiny": tiny})
    rows = args.big_mib * 2**20 // (8 * 1024 * 4)
    tree = {f"w{i}": jask.full((rows, 1024), float(i), np.float32) for i in range(8)}
    start = time.perf_counter()
    jask.save_safetensors(big, tree | {"tiny": tiny})
    print(
        f"save_safetensors of {os.path.getsize(big) / 2**20:.0f} MiB: {time.perf_counter() - start:.2f} s"
    )
    del tree
    new = jask.DiskArray.from_numpy(np.full_like(tiny, 7.0))
    for path in (small, big, small, big):
        arrays = jask.open_safetensors(path, mode="r+")
        start = time.perf_counter()
        arrays["tiny"].update_(new)
        seconds = time.perf_counter() - start
        assert float(np.asarray(arrays["tiny"])[0, 0]) == 7.0
        print(
            f"update_ of a 4 MiB tensor in a {os.path.getsize(path) / 2**20:.0f} MiB file: {seconds:.2f} s"
        )
        del arrays


if __name__ == "__main__":
    main()
