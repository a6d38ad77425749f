"""Chunked arrays: one core's decode rate (zstd, blosc) and the read rate of uncompressed chunks.

python bench/chunked_read.py [MiB] [folder]

Writes a float32 array (a smooth signal plus noise, compressible about 2x) as chunks of 1 MiB,
each codec in turn, and times np.asarray of open_chunked (the engine decodes on its one reader
thread: the rate is one core's, reading from the page cache after a warm-up read). Then the same
bytes uncompressed: open_chunked with no codecs vs jask.DiskArray.open of the raw file, both
reading cold-ish through the engine's usual I/O (direct where the file system allows it).
"""

import os
import sys
import tempfile
import time

import numcodecs
import numpy as np

import jask
from jask.formats._chunked import open_chunked


def _write_chunks(path, arr, rows, encode):
    table, offset = [], 0
    with open(path, "wb") as f:
        for r in range(0, arr.shape[0], rows):
            data = encode(np.ascontiguousarray(arr[r : r + rows]).tobytes())
            f.write(data)
            table.append((0, offset, len(data)))
            offset += len(data)
    return np.array(table, np.int64), offset


def _rate(fn, nbytes, repeat=3):
    fn()  # warm-up (page cache, first mappings)
    best = min(_timed(fn) for _ in range(repeat))
    return nbytes / best / 1e9


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(mib=256, folder=None):
    folder = folder or tempfile.mkdtemp(dir=os.environ.get("JASK_BENCH_DIR", "/var/tmp"))
    jask.set_memory_budget("256MB", scratch_dir=folder)
    cols = 1024
    n_rows = mib * (1 << 20) // (4 * cols)
    rng = np.random.default_rng(0)
    t = np.linspace(0, 200, n_rows * cols, dtype=np.float32).reshape(n_rows, cols)
    arr = (np.sin(t) * 100).round(1) + rng.standard_normal(t.shape, np.float32).round(2)
    rows = (1 << 20) // (4 * cols)  # 1 MiB chunks of whole rows
    meta = os.path.join(folder, "meta")
    open(meta, "w").close()
    codecs = {
        "zstd(3)": ([("zstd", 0)], numcodecs.Zstd(level=3).encode),
        "blosc(lz4, shuffle)": (
            [("blosc", 0)],
            numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, blocksize=0).encode,
        ),
        "blosc(zstd, shuffle)": (
            [("blosc", 0)],
            numcodecs.Blosc("zstd", 3, numcodecs.Blosc.SHUFFLE).encode,
        ),
    }
    numcodecs.blosc.set_nthreads(1)
    for name, (decode, encode) in codecs.items():
        path = os.path.join(folder, "chunks")
        table, stored = _write_chunks(path, arr, rows, encode)
        x = open_chunked(
            meta,
            dtype="float32",
            shape=arr.shape,
            chunk_shape=(rows, cols),
            codecs=decode,
            files=[path],
            chunks=table,
        )
        gbs = _rate(lambda x=x: np.asarray(x), arr.nbytes)
        blobs = [
            encode(np.ascontiguousarray(arr[r : r + rows]).tobytes())
            for r in range(0, 64 * rows, rows)
        ]
        codec = numcodecs.Zstd() if name.startswith("zstd") else numcodecs.Blosc()
        ref = _rate(
            lambda c=codec, bl=blobs: [c.decode(b) for b in bl],
            min(64 * rows, arr.shape[0]) * cols * 4,
        )
        print(
            f"{name:22s} ratio {arr.nbytes / stored:4.2f}  open_chunked {gbs:5.2f} GB/s  "
            f"(numcodecs.decode alone, 1 thread: {ref:5.2f} GB/s)"
        )
        del x
    raw = os.path.join(folder, "raw")
    arr.tofile(raw)
    table = np.array([(0, r * cols * 4, rows * cols * 4) for r in range(0, n_rows, rows)], np.int64)
    x = open_chunked(
        meta,
        dtype="float32",
        shape=arr.shape,
        chunk_shape=(rows, cols),
        codecs=[],
        files=[raw],
        chunks=table,
    )
    y = jask.DiskArray.open(raw, shape=arr.shape, dtype="float32")
    for _ in range(2):  # interleaved, so both see the same cache state
        a = _rate(lambda: np.asarray(x), arr.nbytes, repeat=2)
        b = _rate(lambda: np.asarray(y), arr.nbytes, repeat=2)
        print(f"uncompressed: open_chunked {a:5.2f} GB/s   DiskArray.open {b:5.2f} GB/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256, sys.argv[2] if len(sys.argv) > 2 else None)
