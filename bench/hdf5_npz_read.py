"""Reading HDF5 datasets and .npz members: Jask's engine against h5py and numpy.load.

python -m bench.hdf5_npz_read [--mb 256] [--folder DIR] [--budget 64MB]

Writes one float32 array of --mb MB (values rounded to 2 decimals, so gzip
has something to do) as an HDF5 file with four layouts (contiguous, chunked,
gzip, gzip+shuffle; chunks of 1 MB) and as two .npz archives (np.savez,
np.savez_compressed), then times one full pass over each:

- jask: open, then jnp.sum over the DiskArray (streamed by the engine; the
  second pass is timed, the first compiles);
- h5py slabs: ds[i:i+rows] over chunk-aligned slabs, each summed in NumPy;
- h5py read_direct_chunk: the chunks' stored bytes in a loop, decoded in
  Python (zlib.decompress, unshuffle with NumPy), summed;
- numpy.load: the whole member into memory, summed.

And the open time of a gzip dataset with 10^4 chunks (the chunk index is read
through h5py's chunk_iter at open). Files are read warm (just written): the
rates are the readers' own costs, not the disk's (see bench/disk.py for it).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import zlib

import h5py
import jax.numpy as jnp
import numpy as np

import jask

CHUNK_BYTES = 1 << 20
LAYOUTS = {
    "contiguous": {},
    "chunked": {"chunks": True},
    "gzip": {"chunks": True, "compression": "gzip"},
    "gzip+shuffle": {"chunks": True, "compression": "gzip", "shuffle": True},
}


def timed(f):
    t = time.perf_counter()
    value = f()
    return time.perf_counter() - t, value


def write_inputs(folder: str, mb: int) -> tuple[str, str, str, np.ndarray]:
    cols = 1024
    rows = mb * (1 << 20) // (4 * cols)
    rng = np.random.default_rng(0)
    a = np.round(rng.standard_normal((rows, cols)), 2).astype(np.float32)
    h5 = os.path.join(folder, "bench.h5")
    chunk_rows = CHUNK_BYTES // (4 * cols)
    with h5py.File(h5, "w") as f:
        for name, opts in LAYOUTS.items():
            if opts.get("chunks"):
                opts = {**opts, "chunks": (chunk_rows, cols)}
            f.create_dataset(name, data=a, **opts)
        many = np.round(rng.standard_normal(10_000 * 256), 2).astype(np.float32)
        f.create_dataset("many_chunks", data=many, chunks=(256,), compression="gzip")
    stored, deflated = os.path.join(folder, "s.npz"), os.path.join(folder, "d.npz")
    np.savez(stored, x=a)
    np.savez_compressed(deflated, x=a)
    return h5, stored, deflated, a


def h5py_slabs(path: str, name: str) -> float:
    with h5py.File(path, "r") as f:
        ds = f[name]
        rows = ds.chunks[0] if ds.chunks else CHUNK_BYTES // (4 * ds.shape[1])
        return float(
            sum(ds[i : i + rows].sum(dtype=np.float64) for i in range(0, ds.shape[0], rows))
        )


def h5py_direct_chunks(path: str, name: str) -> float:
    with h5py.File(path, "r") as f:
        ds = f[name]
        plist = ds.id.get_create_plist()
        codes = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
        total = 0.0
        for i in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(i)
            _, raw = ds.id.read_direct_chunk(info.chunk_offset)
            if 1 in codes:
                raw = zlib.decompress(raw)
            chunk = np.frombuffer(raw, np.uint8)
            if 2 in codes:
                chunk = chunk.reshape(4, -1).T.copy()
            total += float(chunk.view(np.float32).sum(dtype=np.float64))
        return total


def jask_pass(open_array) -> tuple[float, float]:
    """Best of 3 open times, and the second of two passes (the first compiles jnp.sum)."""
    t_open, x = min((timed(open_array) for _ in range(3)), key=lambda r: r[0])
    float(jnp.sum(x))
    t_sum, _ = timed(lambda: float(jnp.sum(x)))
    return t_open, t_sum


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--folder", default=None)
    p.add_argument("--budget", default="64MB")
    args = p.parse_args()
    folder = args.folder or tempfile.mkdtemp(prefix="jask-h5npz-")
    os.makedirs(folder, exist_ok=True)
    jask.set_memory_budget(args.budget)
    h5, stored, deflated, a = write_inputs(folder, args.mb)
    nbytes = a.nbytes
    print(f"{args.mb} MB float32 {a.shape}, budget {args.budget}, {os.cpu_count()} CPUs, {folder}")
    print(f"{'input':28} {'reader':24} {'open s':>8} {'pass s':>8} {'GB/s':>6}")

    def row(inp, reader, t_open, t_pass):
        print(f"{inp:28} {reader:24} {t_open:8.3f} {t_pass:8.3f} {nbytes / t_pass / 1e9:6.2f}")

    for name in LAYOUTS:
        with h5py.File(h5, "r") as f:
            stored_mb = f[name].id.get_storage_size() / 1e6
        label = f"hdf5 {name} ({stored_mb:.0f} MB)"
        row(label, "jask open_hdf5 + sum", *jask_pass(lambda n=name: jask.open_hdf5(h5, n)))
        row(label, "h5py ds[slab] + sum", 0.0, timed(lambda n=name: h5py_slabs(h5, n))[0])
        if name != "contiguous":
            row(
                label,
                "h5py read_direct_chunk",
                0.0,
                timed(lambda n=name: h5py_direct_chunks(h5, n))[0],
            )
    for label, path in (("npz stored", stored), ("npz deflated", deflated)):
        label = f"{label} ({os.path.getsize(path) / 1e6:.0f} MB)"
        row(label, "jask open_npz + sum", *jask_pass(lambda p=path: jask.open_npz(p)["x"]))
        t = timed(lambda p=path: float(np.load(p)["x"].sum(dtype=np.float64)))[0]
        row(label, "numpy.load + sum", 0.0, t)
    t_open, x = min(
        (timed(lambda: jask.open_hdf5(h5, "many_chunks")) for _ in range(3)), key=lambda r: r[0]
    )
    print(
        f"open of a gzip dataset of 10^4 chunks: {t_open * 1e3:.1f} ms "
        f"({x.shape}, chunk index through h5py chunk_iter)"
    )


if __name__ == "__main__":
    main()
