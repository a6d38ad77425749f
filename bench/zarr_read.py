"""Read rate of a Zarr (zstd) array: jask.open_zarr against zarr-python and against the disk.

Then the write rate of `to_zarr` against zarr-python writing the same array from memory.

Writes a float32 array with zarr-python (zstd, 4 MiB chunks), then times, each from a cold page
cache where the process may drop it (root): the raw chunk files read from disk; zstd decoding
of every chunk on one core (numcodecs, from the page cache); zarr-python reading the whole array
into NumPy; jask.open_zarr read into NumPy; and jnp.sum over the opened array (streamed within
the budget). Rates are decoded GB/s (stored GB/s for the disk).

    .venv/bin/python bench/zarr_read.py [--gib 1] [--folder /var/tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import jax.numpy as jnp
import numcodecs
import numpy as np
import zarr
from zarr.codecs import ZstdCodec

import jask

COLS = 1024
CHUNK_ROWS = 1024  # 4 MiB chunks of float32


def drop_page_cache() -> bool:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
        return True
    except OSError:
        return False


def chunk_files(path: Path) -> list[Path]:
    return [p for p in sorted((path / "c").rglob("*")) if p.is_file()]


def timed(what: str, nbytes: int, fn, cold: bool) -> float:
    dropped = drop_page_cache() if cold else False
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    cache = "cold" if dropped else "warm"
    print(f"{what:<44} {nbytes / seconds / 1e9:6.2f} GB/s  ({seconds:.2f} s, {cache} cache)")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--folder", default="/var/tmp")
    args = parser.parse_args()
    rows = int(args.gib * (1 << 30)) // (COLS * 4)
    folder = Path(tempfile.mkdtemp(prefix="jask-zarr-bench-", dir=args.folder))
    jask.set_memory_budget("256MB", scratch_dir=folder / "scratch")
    try:
        path = folder / "x.zarr"
        z = zarr.create_array(
            store=str(path),
            shape=(rows, COLS),
            chunks=(CHUNK_ROWS, COLS),
            dtype="float32",
            compressors=ZstdCodec(level=3),
        )
        rng = np.random.default_rng(0)
        for start in range(0, rows, 64 * CHUNK_ROWS):
            stop = min(rows, start + 64 * CHUNK_ROWS)
            z[start:stop] = rng.standard_normal((stop - start, COLS), dtype=np.float32)
        files = chunk_files(path)
        stored = sum(p.stat().st_size for p in files)
        decoded = rows * COLS * 4
        print(
            f"{decoded / 1e9:.2f} GB float32, {len(files)} zstd chunks, stored {stored / 1e9:.2f}"
            f" GB (ratio {stored / decoded:.2f}), {os.cpu_count()} cores"
        )

        def read_files():
            for p in files:
                with open(p, "rb", buffering=0) as f:
                    while f.read(16 << 20):
                        pass

        def decode_one_core():
            zstd = numcodecs.Zstd()
            for p in files:
                zstd.decode(p.read_bytes())

        timed("disk: the chunk files (stored bytes)", stored, read_files, cold=True)
        read_files()  # into the page cache for the one-core decode
        timed("zstd decode, one core (numcodecs)", decoded, decode_one_core, cold=False)
        timed(
            "zarr-python: zarr.open_array(p)[...]",
            decoded,
            lambda: zarr.open_array(str(path))[...],
            cold=True,
        )
        timed(
            "jask: np.asarray(jask.open_zarr(p))",
            decoded,
            lambda: np.asarray(jask.open_zarr(path)),
            cold=True,
        )
        timed(
            "jask: jnp.sum(jask.open_zarr(p)) (budget 256MB)",
            decoded,
            lambda: float(jnp.sum(jask.open_zarr(path))),
            cold=True,
        )
        x, data = jask.open_zarr(path), np.asarray(zarr.open_array(str(path))[...])
        timed(
            "jask: x.to_zarr(q) (zstd 3, fdatasync)",
            decoded,
            lambda: x.to_zarr(folder / "y.zarr", chunks=(CHUNK_ROWS, COLS)),
            cold=True,
        )
        timed(
            "zarr-python: writing it from NumPy (zstd 3)",
            decoded,
            lambda: zarr.create_array(
                store=str(folder / "z.zarr"),
                data=data,
                chunks=(CHUNK_ROWS, COLS),
                compressors=ZstdCodec(level=3),
            ),
            cold=True,
        )
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
