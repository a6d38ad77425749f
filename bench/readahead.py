"""Loops that walk a DiskArray's leading axis, from a cold page cache, against their bound.

1. A data loader: `for i in range(k): step(jask.rows(x, i * B, B))`, a jitted in-memory step
   (tanh(batch @ w), w in memory) per batch of B rows of a float32 table, Jask with its readahead
   on (`_engine.set_readahead(True)`: the next batches read while the step runs,
   src/engine/storage/readahead.hpp) and off (the default). Contender: NumPy memmap
   (`jnp.asarray(x_mm[i * B:(i + 1) * B])`).
2. Layer-streamed inference (W7's loop): `for i in range(L): h = relu(h @ W[i])` over a stacked
   float32 DiskArray of L layers of D x D weights, an in-memory batch h.

Contenders, taking turns trial by trial: Jask on the DiskArray, and NumPy memmap + jnp per layer
(`jnp.asarray(W_mm[i])`, what a user writes without Jask). The bound is max(weight bytes / disk
read bandwidth, flops / in-memory matmul rate), both measured in this run (the disk with large
direct reads, several in flight, bench/disk.py; the matmul on the same shapes in memory). A loop
that reads layer i+1 while layer i multiplies reaches the bound; one that reads, then multiplies,
takes their sum.

    python -m bench.readahead [--folder DIR] [--layers 8] [--dim 4096] [--batch 256]
                              [--trials 3] [--budget-mib 256] [--loader-gib 1] [--skip-layers]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jask

from .disk import bandwidth
from .harness import cached_fraction, evict


def make_weights(path: Path, layers: int, dim: int) -> None:
    """(layers, dim, dim) float32 weights scaled to keep activations bounded, one layer at a time."""
    if path.exists():
        return
    partial = path.with_suffix(".partial")
    out = np.lib.format.open_memmap(partial, "w+", np.float32, (layers, dim, dim))
    for i in range(layers):
        rng = np.random.default_rng(i)
        out[i] = rng.standard_normal((dim, dim), np.float32) * np.float32(2.0 / dim**0.5)
    out.flush()
    del out
    os.replace(partial, path)


def jask_forward(w, h):
    for i in range(w.shape[0]):
        h = jax.nn.relu(h @ w[i])
    return np.asarray(h)


def numpy_forward(path, h):
    w = np.load(path, mmap_mode="r")
    for i in range(w.shape[0]):
        h = jax.nn.relu(h @ jnp.asarray(w[i]))
    return np.asarray(jax.block_until_ready(h))


LOADER_COLS, LOADER_HIDDEN, LOADER_BATCH = 1024, 128, 4096


def make_table(path: Path, rows: int) -> None:
    if path.exists():
        return
    partial = path.with_suffix(".partial")
    out = np.lib.format.open_memmap(partial, "w+", np.float32, (rows, LOADER_COLS))
    step = (64 << 20) // (4 * LOADER_COLS)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop] = np.random.default_rng(start).standard_normal((stop - start, LOADER_COLS))
    out.flush()
    del out
    os.replace(partial, path)


@jax.jit
def loader_step(acc, batch, w):
    return acc + jnp.sum(jnp.tanh(batch @ w))


def loader_loop(read, batches, w):
    acc = jnp.zeros((), jnp.float32)
    for i in range(batches):
        acc = loader_step(acc, read(i), w)
    return float(acc)


def cold(path: Path) -> float:
    """Drops `path` from the page cache; the fraction still cached (should be 0).

    The kernel keeps a mapped file's pages whatever fadvise asks, so the NumPy trials' memmaps
    must be gone first: their last references sit in reference cycles (JAX's), freed only by
    the collector."""
    gc.collect()
    evict([str(path)])
    return cached_fraction(str(path))


def numpy_loader_loop(path: Path, batches: int, w) -> float:
    """The loop over a memmap of `path`, whose mapping is unmapped once the collector frees
    it (`cold`)."""
    mm = np.load(path, mmap_mode="r")
    read = lambda i: jnp.asarray(mm[i * LOADER_BATCH : (i + 1) * LOADER_BATCH])  # noqa: E731
    return loader_loop(read, batches, w)


def loader(args, folder: Path) -> None:
    rows = int(args.loader_gib * (1 << 30)) // (4 * LOADER_COLS)
    path = folder / f"loader-{rows}x{LOADER_COLS}.npy"
    make_table(path, rows)
    batches = rows // LOADER_BATCH
    x = jask.DiskArray.open(str(path), mode="r")
    w = jax.random.normal(jax.random.key(1), (LOADER_COLS, LOADER_HIDDEN), jnp.float32) * 0.03
    # A copy: an array aliasing a mapping would keep its pages cached through every eviction.
    batch0 = jnp.asarray(np.array(np.load(path, mmap_mode="r")[:LOADER_BATCH]))
    loader_step(jnp.zeros((), jnp.float32), batch0, w).block_until_ready()
    jask_rows = lambda i: jask.rows(x, i * LOADER_BATCH, LOADER_BATCH)  # noqa: E731
    readers = {"jask": jask_rows, "numpy": None}
    has_switch = hasattr(jask._engine, "set_readahead")
    if has_switch:
        readers["jask-off"] = jask_rows
    names = list(readers)
    times: dict[str, list[float]] = {name: [] for name in names}
    sums = {}
    cached = 0.0  # the most of the table in the page cache as a trial started
    for trial in range(args.trials):
        for name in names if trial % 2 == 0 else names[::-1]:
            cached = max(cached, cold(path))
            if has_switch:
                jask._engine.set_readahead(name != "jask-off")
            start = time.perf_counter()
            if readers[name] is None:
                sums[name] = numpy_loader_loop(path, batches, w)
            else:
                sums[name] = loader_loop(readers[name], batches, w)
            times[name].append(time.perf_counter() - start)
    if has_switch:
        jask._engine.set_readahead(True)
    for name in names:
        np.testing.assert_allclose(sums[name], sums["numpy"], rtol=1e-4)
    compute = min(
        _timed(lambda: loader_step(jnp.zeros(()), batch0, w).block_until_ready()) for _ in range(5)
    )
    read_bps = bandwidth(str(folder), 1 << 30, passes=1)["read_bps"]
    io_bound, compute_bound = rows * LOADER_COLS * 4 / read_bps, batches * compute
    bound = max(io_bound, compute_bound)
    print(
        f"loader: {batches} batches of {LOADER_BATCH} x {LOADER_COLS} float32 "
        f"({LOADER_BATCH * LOADER_COLS * 4 >> 20} MiB) from {path.name}, step tanh(batch @ w) with w "
        f"{LOADER_COLS}x{LOADER_HIDDEN} in memory, load {os.getloadavg()[0]:.1f}"
    )
    print(f"  cold trials: at most {cached:.1%} of the table cached as a trial started")
    print(
        f"  bound {bound:.2f} s = max(table / {read_bps / 1e9:.2f} GB/s = {io_bound:.2f} s, "
        f"{batches} x {compute * 1e3:.1f} ms of step = {compute_bound:.2f} s); sum of both "
        f"{io_bound + compute_bound:.2f} s"
    )
    labels = {
        "jask": "Jask jask.rows",
        "jask-off": "Jask, readahead off",
        "numpy": "NumPy memmap + jnp",
    }
    for name in names:
        label = labels[name]
        t = statistics.median(times[name])
        print(
            f"  {label:20s} median {t:6.2f} s = {t / bound:.2f}x the bound "
            f"(runs {' '.join(f'{s:.2f}' for s in times[name])} s)"
        )
    if hasattr(jask._engine, "readahead_stats"):
        print(f"  readahead (started, served, dropped, held): {jask._engine.readahead_stats()}")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def matmul_seconds(batch: int, dim: int) -> float:
    """Seconds of one in-memory (batch, dim) @ (dim, dim) float32 product with relu (best of 5)."""
    a = jnp.ones((batch, dim), jnp.float32)
    b = jnp.ones((dim, dim), jnp.float32)
    f = jax.jit(lambda a, b: jax.nn.relu(a @ b))
    jax.block_until_ready(f(a, b))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(f(a, b))
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.readahead", description=__doc__)
    p.add_argument("--folder", default="build/bench-data", help="where the weights live")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--budget-mib", type=int, default=256)
    p.add_argument("--loader-gib", type=float, default=1.0, help="the loader's table (0: skip)")
    p.add_argument("--skip-layers", action="store_true", help="only the loader")
    args = p.parse_args(argv)

    L, D = args.layers, args.dim
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    jask.set_memory_budget(args.budget_mib << 20)
    if args.loader_gib:
        loader(args, folder)
    if args.skip_layers:
        return
    path = folder / f"layers-{L}x{D}x{D}.npy"
    make_weights(path, L, D)
    jask.set_memory_budget(args.budget_mib << 20)
    w = jask.DiskArray.open(str(path), mode="r")
    h0 = jax.random.normal(jax.random.key(0), (args.batch, D), jnp.float32)
    times: dict[str, list[float]] = {"jask": [], "numpy": []}
    results = {}
    cached = 0.0  # the most of the weights in the page cache as a trial started
    for trial in range(args.trials):
        for name in ("jask", "numpy") if trial % 2 == 0 else ("numpy", "jask"):
            cached = max(cached, cold(path))
            start = time.perf_counter()
            results[name] = jask_forward(w, h0) if name == "jask" else numpy_forward(path, h0)
            times[name].append(time.perf_counter() - start)
    np.testing.assert_allclose(results["jask"], results["numpy"], rtol=2e-3, atol=1e-3)
    assert results["jask"].dtype == results["numpy"].dtype == np.float32

    weight_bytes = L * D * D * 4
    read_bps = bandwidth(str(folder), 1 << 30, passes=1)["read_bps"]
    mm = matmul_seconds(args.batch, D)
    io_bound, compute_bound = weight_bytes / read_bps, L * mm
    bound = max(io_bound, compute_bound)
    print(
        f"{L} layers of {D}x{D} float32 ({weight_bytes / (1 << 20):.0f} MiB), batch {args.batch}, "
        f"budget {args.budget_mib} MiB, cold page cache (at most {cached:.1%} of the weights "
        f"cached as a trial started), load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"  bound {bound:.2f} s = max(weights / {read_bps / 1e9:.2f} GB/s = {io_bound:.2f} s, "
        f"{L} x {mm * 1e3:.0f} ms of in-memory matmul = {compute_bound:.2f} s)"
    )
    for name, label in (("jask", "Jask"), ("numpy", "NumPy memmap + jnp")):
        t = statistics.median(times[name])
        print(
            f"  {label:20s} median {t:6.2f} s = {t / bound:.2f}x the bound "
            f"(runs {' '.join(f'{s:.2f}' for s in times[name])} s)"
        )


if __name__ == "__main__":
    main()
