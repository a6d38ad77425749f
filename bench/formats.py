"""W1s and W1z: W1's sum(square(x - y)) over the same x and y stored in the formats users have.

W1s reads x and y as two tensors of one safetensors file, W1z as two arrays of a Zarr v3 group
compressed with zstd (level 1; chunks of whole rows, 4 MiB, less under a small budget). Both are
derived once from W1's .npy files, in a child process (`formats.main`), and reused:
the safetensors file is written by `jask.save_safetensors` (streamed from the .npy files), the
zarr group by zarr-python itself, chunk by chunk, as users' data is written.

The limit of a derived input is its bytes on disk at the disk's read bandwidth; for the
compressed one, `facts` also measures the rate one core decodes its chunks (numcodecs.Zstd, in
the parent, this run), against which the report puts each contender's decoded GB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

from .workloads import (
    MIB,
    Context,
    Trial,
    Workload,
    arrays,
    fsync,
    rows_per_chunk,
    sum_of_squares,
    w1_jask_trial,
)

ZSTD_LEVEL = 1
ZARR_CHUNK = 4 * MIB  # bytes of a zarr chunk at the default budget (budget / 8 when smaller)
DECODE_PROBE = 8  # chunks of x that `facts` decodes to measure one core's zstd rate


def _stem(plan) -> str:
    return "w1-" + "x".join(map(str, plan["x"].shape))


def zarr_chunk_rows(plan, budget: int) -> int:
    return rows_per_chunk(plan["x"].shape, min(ZARR_CHUNK, budget // 8))


class SafetensorsInput:
    """x and y as the tensors "x" and "y" of one safetensors file."""

    pattern = re.compile(r"w1-[0-9x]+\.safetensors(\.partial)?")

    def path(self, data_dir: str, plan, budget: int) -> str:
        return os.path.join(data_dir, _stem(plan) + ".safetensors")

    def files(self, data_dir: str, plan, budget: int) -> list[str]:
        return [self.path(data_dir, plan, budget)]

    def write(self, ctx: Context) -> None:
        jask = ctx.jask()
        path = self.path(ctx.data_dir, ctx.plan, ctx.budget)
        partial = path + ".partial"
        jask.save_safetensors(partial, {"x": ctx.disk("x"), "y": ctx.disk("y")})
        fsync(partial)
        os.replace(partial, path)

    def facts(self, data_dir: str, plan, budget: int) -> dict:
        return {}


class ZarrInput:
    """x and y as the arrays "x" and "y" of a Zarr v3 group, zstd-compressed chunks of whole rows."""

    pattern = re.compile(r"w1-[0-9x]+-c[0-9]+\.zarr(\.partial)?")

    def path(self, data_dir: str, plan, budget: int) -> str:
        return os.path.join(data_dir, f"{_stem(plan)}-c{zarr_chunk_rows(plan, budget)}.zarr")

    def files(self, data_dir: str, plan, budget: int) -> list[str]:
        return sorted(
            os.path.join(folder, name)
            for folder, _, names in os.walk(self.path(data_dir, plan, budget))
            for name in names
        )

    def write(self, ctx: Context) -> None:
        import zarr

        path = self.path(ctx.data_dir, ctx.plan, ctx.budget)
        partial = path + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        group = zarr.open_group(partial, mode="w", zarr_format=3)
        rows = zarr_chunk_rows(ctx.plan, ctx.budget)
        for name in ("x", "y"):
            source = ctx.mmap(name)
            array = group.create_array(
                name,
                shape=source.shape,
                chunks=(rows,) + source.shape[1:],
                dtype=source.dtype,
                compressors=zarr.codecs.ZstdCodec(level=ZSTD_LEVEL),
            )
            step = rows * max(1, ctx.budget // 4 // (rows * source.shape[1] * 4))
            for i in range(0, source.shape[0], step):
                array[i : i + step] = source[i : i + step]
        fsync(*(os.path.join(f, n) for f, _, names in os.walk(partial) for n in names))
        os.replace(partial, path)

    def facts(self, data_dir: str, plan, budget: int) -> dict:
        """The compression ratio, and one core's zstd decode rate over a few chunks of x (best of 5)."""
        import numcodecs

        path = self.path(data_dir, plan, budget)
        stored = sum(os.path.getsize(f) for f in self.files(data_dir, plan, budget))
        count = len(os.listdir(os.path.join(path, "x", "c")))
        blobs = []
        for k in np.linspace(0, count - 1, min(DECODE_PROBE, count)).astype(int):
            with open(os.path.join(path, "x", "c", str(k), "0"), "rb") as f:
                blobs.append(f.read())
        codec = numcodecs.Zstd()
        decoded = sum(len(codec.decode(b)) for b in blobs)
        best = min(_timed(lambda: [codec.decode(b) for b in blobs]) for _ in range(5))
        return {
            "decoded_bytes": 2 * plan["x"].nbytes,
            "stored_ratio": 2 * plan["x"].nbytes / stored,
            "decode_bps": decoded / best,
        }


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


SAFETENSORS, ZARR = SafetensorsInput(), ZarrInput()


def generate(derived, data_dir: str, size: int, budget: int, log=print) -> None:
    """Writes a derived input from W1's .npy files (already generated) unless it is there.

    Derived inputs of other sizes are removed, as `workloads.generate` removes data files.
    """
    plan = arrays(size, budget)
    path = derived.path(data_dir, plan, budget)
    for stale in os.listdir(data_dir):
        full = os.path.join(data_dir, stale)
        if derived.pattern.fullmatch(stale) and full != path:
            shutil.rmtree(full) if os.path.isdir(full) else os.remove(full)
    if os.path.exists(path):
        return
    log(f"  generating {os.path.basename(path)} from W1's x and y")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    )
    kind = "safetensors" if derived is SAFETENSORS else "zarr"
    # -c rather than -m: bench's __init__ imports this module, so -m would run a second copy
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from bench.formats import main; main({[kind, os.path.abspath(data_dir), str(size), str(budget)]!r})",
        ],
        check=True,
        cwd=root,
        env=env,
    )


def safetensors_tensors(path: str) -> dict[str, np.memmap]:
    """Each tensor of a safetensors file as a read-only numpy.memmap, at the offsets its header gives."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    dtypes = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32}
    return {
        name: np.memmap(
            path,
            dtypes[info["dtype"]],
            "r",
            offset=8 + length + info["data_offsets"][0],
            shape=tuple(info["shape"]),
        )
        for name, info in header.items()
        if name != "__metadata__"
    }


def w1s_jask(ctx: Context) -> Trial:
    jask = ctx.jask()
    tensors = jask.open_safetensors(SAFETENSORS.path(ctx.data_dir, ctx.plan, ctx.budget))
    return w1_jask_trial(tensors["x"], tensors["y"])


def w1s_numpy(ctx: Context) -> Trial:
    tensors = safetensors_tensors(SAFETENSORS.path(ctx.data_dir, ctx.plan, ctx.budget))
    x, y = tensors["x"], tensors["y"]
    rows = rows_per_chunk(x.shape, ctx.budget // 4)
    return Trial(lambda: sum_of_squares(x, y, rows), lambda total: [total])


def w1z_jask(ctx: Context) -> Trial:
    jask = ctx.jask()
    group = jask.open_zarr(ZARR.path(ctx.data_dir, ctx.plan, ctx.budget))
    return w1_jask_trial(group["x"], group["y"])


def w1z_zarr(ctx: Context) -> Trial:
    """zarr-python reads slabs of whole chunks (budget / 4 each), NumPy reduces them."""
    import zarr

    group = zarr.open_group(ZARR.path(ctx.data_dir, ctx.plan, ctx.budget), mode="r")
    x, y = group["x"], group["y"]
    chunk = x.chunks[0]
    rows = chunk * max(1, rows_per_chunk(x.shape, ctx.budget // 4) // chunk)
    return Trial(lambda: sum_of_squares(x, y, rows), lambda total: [total])


def w1z_dask(ctx: Context) -> Trial:
    """dask.array.from_zarr: one task per zarr chunk, threaded scheduler."""
    import dask.array as da

    path = ZARR.path(ctx.data_dir, ctx.plan, ctx.budget)
    x, y = da.from_zarr(path, component="x"), da.from_zarr(path, component="y")
    total = da.square(x - y).sum(dtype=np.float64)
    return Trial(lambda: float(total.compute(scheduler="threads")), lambda total: [total])


def _derived_cost(plan):
    # the bytes read are the derived files' (the harness counts them); nothing written, no flops
    return 0, 0, 0


FORMAT_WORKLOADS = {
    w.name: w
    for w in [
        Workload(
            "W1s",
            "W1 over one safetensors file",
            "GB/s",
            ("x", "y"),
            _derived_cost,
            {"jask": w1s_jask, "numpy": w1s_numpy},
            derived=SAFETENSORS,
        ),
        Workload(
            "W1z",
            f"W1 over a Zarr v3 group, zstd level {ZSTD_LEVEL}",
            "GB/s",
            ("x", "y"),
            _derived_cost,
            {"jask": w1z_jask, "zarr": w1z_zarr, "dask": w1z_dask},
            derived=ZARR,
        ),
    ]
}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.formats", description=generate.__doc__)
    p.add_argument("kind", choices=["safetensors", "zarr"])
    p.add_argument("data")
    p.add_argument("size", type=int)
    p.add_argument("budget", type=int)
    args = p.parse_args(argv)
    ctx = Context(args.data, args.data, args.budget, arrays(args.size, args.budget))
    (SAFETENSORS if args.kind == "safetensors" else ZARR).write(ctx)
