"""The workloads W1..W5: their data files and sizes, their minimal I/O and flops, and each contender's code.

A contender is a function of a Context that does its setup (open files, load
data into memory, compile) and returns a Trial: `run` is the part that is
timed, `check` computes a few numbers from its result after timing, which
are compared across contenders. Heavy imports (jax, jask, dask, optax) happen
inside the contenders, so each child process loads only what its contender uses.

Chunk sizes follow the budget the way a careful user would size them: NumPy
holds a chunk of each operand plus temporaries (budget / 4 per chunk, budget
/ 8 where a step has more temporaries); Dask runs two worker threads, each
with its chunks and temporaries (budget / 8 per chunk).
"""

from __future__ import annotations

import math
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MIB, GIB = 1 << 20, 1 << 30
SEED = 20240601

A = 2.5  # W2's scalar: a * x + y
W3_K = 32768  # W3's contraction dimension
# The capped regime: a workload's data (bytes read + written) at least this many times the cap.
CAP_RATIO = 4
# W3 under a cap its own inputs are not CAP_RATIO times: w keeps 1.25 budgets, in this many
# columns, and x has the rows for the data to pass CAP_RATIO caps (by W3_CAPPED_MARGIN). So few
# columns keep the flops near the uncapped W3's, the matmul as much compute as reading.
W3_CAPPED_COLS = 256
W3_CAPPED_MARGIN = 1.05
FEATURES, HIDDEN, OUTPUTS = 256, 64, 16  # W4: a (N, FEATURES) @ b @ c -> (N, OUTPUTS)
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8  # W5: optax.adam(1e-3) and its defaults

CONTENDERS = {
    "jask": "Jask",
    "numpy": "NumPy memmap, chunked",
    "dask": "Dask, threaded",
    "jax": "jax.numpy in memory",
    "numpy-mem": "NumPy @ in memory",
    "zarr": "zarr-python + NumPy loop",
    "safetensors": "safetensors safe_open + jnp",
}
IN_MEMORY = {
    "jax",
    "numpy-mem",
}  # data loaded before timing: the compute ceiling, not I/O contenders


@dataclass(frozen=True)
class Array:
    """A float32 data file of standard normal values times `std`."""

    name: str
    shape: tuple[int, ...]
    std: float = 1.0

    @property
    def nbytes(self) -> int:
        return 4 * math.prod(self.shape)

    @property
    def filename(self) -> str:
        return f"{self.name}-{'x'.join(map(str, self.shape))}.npy"


def arrays(size: int, budget: int, cap: int | None = None) -> dict[str, Array]:
    """The data files for input size `size` (bytes of each large input) and memory budget `budget`,
    and under a memory cap of `cap` bytes.

    W1, W2 and W4 share x (N, 256) of `size` bytes; W3's x is a quarter of
    that and its w is 1.25 budgets, so both exceed the budget; W5's
    parameters are half of `size`, at most 1 GiB; W6-W8's data is 2 * size (bench/training.py).
    Under a cap W3's data is not CAP_RATIO times, W3 gets inputs that are (mxc, mwc:
    `w3_inputs`).
    """
    rows = max(1, size // (4 * FEATURES))
    w3_rows = max(1, size // 4 // (4 * W3_K))
    w3_cols = max(1, budget * 5 // 4 // (4 * W3_K))
    params = max(1024, min(GIB, size // 2) // 4)
    specs = [
        Array("x", (rows, FEATURES)),
        Array("y", (rows, FEATURES)),
        Array("b", (FEATURES, HIDDEN), 1 / FEATURES**0.5),
        Array("c", (HIDDEN, OUTPUTS), 1 / HIDDEN**0.5),
        Array("t", (rows, OUTPUTS)),
        Array("mx", (w3_rows, W3_K)),
        Array("mw", (W3_K, w3_cols), 1 / W3_K**0.5),
        Array("p", (params,)),
        Array("g", (params,)),
        *training_arrays(size),
    ]
    if cap and 4 * (w3_rows * W3_K + W3_K * w3_cols + w3_rows * w3_cols) < CAP_RATIO * cap:
        k = max(1, budget * 5 // 4 // (4 * W3_CAPPED_COLS))
        target = int(W3_CAPPED_MARGIN * CAP_RATIO * cap) - 4 * k * W3_CAPPED_COLS
        n = max(1, -(-target // (4 * (k + W3_CAPPED_COLS))))
        specs += [
            Array("mxc", (n, k)),
            Array("mwc", (k, W3_CAPPED_COLS), 1 / k**0.5),
        ]
    return {a.name: a for a in specs}


def w3_inputs(plan: dict[str, Array]) -> tuple[str, str]:
    """W3's x and w in this plan: the capped regime's where it has them."""
    return ("mxc", "mwc") if "mxc" in plan else ("mx", "mw")


def generate(plan: dict[str, Array], names, data_dir: str, log=print) -> None:
    """Writes the named arrays chunk by chunk, reusing files already there.

    Data files of other sizes (named like this plan's, other shapes) are
    removed, so a sweep keeps one size on disk at a time.
    """
    ours = re.compile(rf"({'|'.join(plan)})-[0-9x]+\.npy(\.partial)?")
    wanted = {a.filename for a in plan.values()}
    for stale in sorted(f for f in os.listdir(data_dir) if ours.fullmatch(f) and f not in wanted):
        os.remove(os.path.join(data_dir, stale))
    for name in names:
        spec = plan[name]
        path = os.path.join(data_dir, spec.filename)
        if os.path.exists(path):
            continue
        log(f"  generating {spec.filename} ({spec.nbytes / GIB:.2f} GiB)")
        partial = path + ".partial"
        out = np.lib.format.open_memmap(partial, "w+", np.float32, spec.shape)
        flat = out.reshape(-1)
        step = 16 * MIB
        for i, start in enumerate(range(0, flat.size, step)):
            rng = np.random.default_rng([SEED, zlib.crc32(name.encode()), i])
            stop = min(start + step, flat.size)
            flat[start:stop] = rng.standard_normal(stop - start, np.float32) * np.float32(spec.std)
        out.flush()
        del flat, out
        fsync(partial)
        os.replace(partial, path)


@dataclass
class Trial:
    """A prepared contender: `run()` is timed; `check(result)` gives numbers to compare, after timing."""

    run: Callable[[], Any]
    check: Callable[[Any], list[float]]
    evict: list[str] = field(
        default_factory=list
    )  # files besides the inputs to drop from the page cache


@dataclass
class Context:
    """Where a contender finds its data and writes its outputs, and the budget it works within."""

    data_dir: str
    out_dir: str
    budget: int
    plan: dict[str, Array]

    def path(self, name: str) -> str:
        return os.path.join(self.data_dir, self.plan[name].filename)

    def mmap(self, name: str) -> np.ndarray:
        return np.load(self.path(name), mmap_mode="r")

    def load(self, name: str) -> np.ndarray:
        return np.load(self.path(name))

    def output(self, name: str, shape) -> np.memmap:
        return np.lib.format.open_memmap(
            os.path.join(self.out_dir, name + ".npy"), "w+", np.float32, tuple(shape)
        )

    def device(self, name: str):
        """The array in memory as a jax.Array (for the in-memory contender)."""
        import jax.numpy as jnp

        return jnp.asarray(self.load(name)).block_until_ready()

    def jask(self):
        """Jask, with this context's budget and scratch space next to the data (same disk)."""
        import jask

        jask.set_memory_budget(self.budget, scratch_dir=os.path.join(self.data_dir, "scratch"))
        return jask

    def disk(self, name: str):
        import jask

        return jask.DiskArray.open(self.path(name))

    def dask(self, name: str, rows: int):
        """A Dask array over the file, in chunks of `rows` rows."""
        return dask_file(self.path(name), (rows,) + self.plan[name].shape[1:])


class NpyFile:
    """A .npy file as Dask reads it: each chunk is a slice of a numpy.memmap of the file.

    Not a numpy.memmap itself: dask.array.from_array copies the NumPy arrays it
    is given (`x = x.copy()` in dask/array/core.py, dask 2026.8 here), which
    reads a whole memmapped file into memory before any work.
    """

    def __init__(self, path: str):
        header = np.load(path, mmap_mode="r")
        self.path, self.shape, self.dtype, self.ndim = path, header.shape, header.dtype, header.ndim

    def __getitem__(self, key):
        return np.load(self.path, mmap_mode="r")[key]


def dask_file(path: str, chunks: tuple[int, ...]):
    """A Dask array over a .npy file, read chunk by chunk through numpy.memmap."""
    import dask.array as da

    f = NpyFile(path)
    return da.from_array(f, chunks=chunks, name=False, meta=np.empty((0,) * f.ndim, f.dtype))


def rows_per_chunk(shape, chunk_bytes: int) -> int:
    """Leading-axis rows of a float32 array of `shape` that fit in `chunk_bytes` (at least one)."""
    return max(1, chunk_bytes // (4 * math.prod(shape[1:])))


def chunks(shape, chunk_bytes: int) -> list[tuple[int, int]]:
    step = rows_per_chunk(shape, chunk_bytes)
    return [(i, min(i + step, shape[0])) for i in range(0, shape[0], step)]


def fsync(*paths: str) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def flush(*outputs: np.memmap) -> None:
    """Writes memmap outputs back and waits for the disk: what 'written' means for every contender."""
    for out in outputs:
        out.flush()
        fsync(out.filename)


def sample(array, count: int = 4096) -> np.ndarray:
    """`count` elements spread evenly over the array (NumPy, memmap or jax.Array), as float64."""
    flat = array.reshape(-1)
    index = np.linspace(0, flat.shape[0] - 1, min(count, flat.shape[0])).astype(np.int64)
    return np.asarray(flat[index], dtype=np.float64)


def norm(values) -> float:
    return float(np.linalg.norm(np.asarray(values, dtype=np.float64)))


def compiled(jitted, *args):
    """A jitted function lowered and compiled ahead of time, so timing excludes compilation."""
    return jitted.lower(*args).compile()


def jask_file(x) -> np.ndarray:
    """A Jask result's file, read back with NumPy (for checks)."""
    return np.load(x.path, mmap_mode="r")


# W1: sum(square(x - y)), I/O bound.


def w1_jask_trial(x, y) -> Trial:
    """W1 compiled by Jask over any two DiskArrays (also W1s and W1z: bench/formats.py)."""
    import jax

    import jask

    f = compiled(jax.jit(lambda x, y: jask.sum(jask.square(x - y))), x, y)
    return Trial(lambda: float(f(x, y)), lambda total: [total])


def w1_jask(ctx: Context) -> Trial:
    ctx.jask()
    return w1_jask_trial(ctx.disk("x"), ctx.disk("y"))


def sum_of_squares(x, y, rows: int) -> float:
    """W1's NumPy loop over slabs of `rows` rows of any two sliceable arrays."""
    total = 0.0
    for i in range(0, x.shape[0], rows):
        d = np.subtract(x[i : i + rows], y[i : i + rows])
        np.square(d, out=d)
        total += float(d.sum(dtype=np.float64))
    return total


def w1_numpy(ctx: Context) -> Trial:
    x, y = ctx.mmap("x"), ctx.mmap("y")
    rows = rows_per_chunk(x.shape, ctx.budget // 4)
    return Trial(lambda: sum_of_squares(x, y, rows), lambda total: [total])


def w1_dask(ctx: Context) -> Trial:
    import dask.array as da

    rows = rows_per_chunk(ctx.plan["x"].shape, ctx.budget // 8)
    x, y = ctx.dask("x", rows), ctx.dask("y", rows)
    total = da.square(x - y).sum(dtype=np.float64)
    return Trial(lambda: float(total.compute(scheduler="threads")), lambda total: [total])


def w1_jax(ctx: Context) -> Trial:
    import jax
    import jax.numpy as jnp

    x, y = ctx.device("x"), ctx.device("y")
    f = compiled(jax.jit(lambda x, y: jnp.sum(jnp.square(x - y))), x, y)
    return Trial(lambda: float(f(x, y)), lambda total: [total])


# W2: a * x + y written to a new array, read and write bound.


def w2_jask(ctx: Context) -> Trial:
    ctx.jask()
    import jax

    x, y = ctx.disk("x"), ctx.disk("y")
    f = compiled(jax.jit(lambda x, y: A * x + y), x, y)

    def run():
        out = jax.block_until_ready(f(x, y))
        fsync(out.path)
        return out

    return Trial(run, lambda out: [norm(sample(jask_file(out)))])


def w2_numpy(ctx: Context) -> Trial:
    x, y = ctx.mmap("x"), ctx.mmap("y")
    out = ctx.output("out", x.shape)

    def run():
        for i, j in chunks(x.shape, ctx.budget // 4):
            o = out[i:j]
            np.multiply(x[i:j], A, out=o)
            o += y[i:j]
        flush(out)
        return out

    return Trial(run, lambda out: [norm(sample(out))])


def store(ctx: Context, **exprs) -> list[np.memmap]:
    """Computes Dask arrays into new .npy files (threaded scheduler) and flushes them to disk."""
    import dask.array as da

    outs = [ctx.output(name, e.shape) for name, e in exprs.items()]
    da.store(list(exprs.values()), outs, lock=False, scheduler="threads")
    flush(*outs)
    return outs


def w2_dask(ctx: Context) -> Trial:
    rows = rows_per_chunk(ctx.plan["x"].shape, ctx.budget // 8)
    x, y = ctx.dask("x", rows), ctx.dask("y", rows)
    return Trial(lambda: store(ctx, out=A * x + y)[0], lambda out: [norm(sample(out))])


def w2_jax(ctx: Context) -> Trial:
    import jax

    x, y = ctx.device("x"), ctx.device("y")
    f = compiled(jax.jit(lambda x, y: A * x + y), x, y)
    return Trial(lambda: f(x, y).block_until_ready(), lambda out: [norm(sample(out))])


# W3: x @ w with both operands larger than the budget, compute bound.


def w3_jask(ctx: Context) -> Trial:
    ctx.jask()
    import jax

    x, w = (ctx.disk(name) for name in w3_inputs(ctx.plan))
    f = compiled(jax.jit(lambda x, w: x @ w), x, w)

    def run():
        out = jax.block_until_ready(f(x, w))
        fsync(out.path)
        return out

    return Trial(run, lambda out: [norm(sample(jask_file(out)))])


def w3_numpy(ctx: Context) -> Trial:
    """Column blocks of w of half the budget, each multiplied by row blocks of x of a quarter."""
    x, w = (ctx.mmap(name) for name in w3_inputs(ctx.plan))
    out = ctx.output("out", (x.shape[0], w.shape[1]))
    cols = rows_per_chunk((w.shape[1], w.shape[0]), ctx.budget // 2)

    def run():
        for c in range(0, w.shape[1], cols):
            block = np.ascontiguousarray(w[:, c : c + cols])
            for i, j in chunks(x.shape, ctx.budget // 4):
                out[i:j, c : c + cols] = x[i:j] @ block
        flush(out)
        return out

    return Trial(run, lambda out: [norm(sample(out))])


def w3_dask(ctx: Context) -> Trial:
    """Square-ish chunks of budget / 8 on both operands, the contraction axis chunked too (Dask sums the
    partial products); chunks of whole rows of x would make each task's tile too thin to compute well."""
    side = math.isqrt(ctx.budget // 8 // 4)
    x_name, w_name = w3_inputs(ctx.plan)
    (n, k), m = ctx.plan[x_name].shape, ctx.plan[w_name].shape[1]
    x = dask_file(ctx.path(x_name), (min(n, side), min(k, side)))
    w = dask_file(ctx.path(w_name), (min(k, side), min(m, side)))
    return Trial(lambda: store(ctx, out=x @ w)[0], lambda out: [norm(sample(out))])


def w3_jax(ctx: Context) -> Trial:
    import jax
    import jax.numpy as jnp

    x, w = (ctx.device(name) for name in w3_inputs(ctx.plan))
    f = compiled(jax.jit(jnp.matmul), x, w)
    return Trial(lambda: f(x, w).block_until_ready(), lambda out: [norm(sample(out))])


def w3_numpy_in_memory(ctx: Context) -> Trial:
    x, w = (ctx.load(name) for name in w3_inputs(ctx.plan))
    return Trial(lambda: x @ w, lambda out: [norm(sample(out))])


# W4: loss and gradients of sum(square(a @ b @ c - t)) with respect to a, b and c; a tall.


def w4_jask(ctx: Context) -> Trial:
    jask = ctx.jask()
    import jax

    def loss(a, b, c, t):
        return jask.sum(jask.square(jask.dot(jask.dot(a, b), c) - t))

    a, b, c, t = ctx.disk("x"), ctx.disk("b"), ctx.disk("c"), ctx.disk("t")
    f = compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))), a, b, c, t)

    def run():
        value, grads = f(a, b, c, t)
        jax.block_until_ready(grads)
        fsync(grads[0].path)
        return float(value), grads

    def check(result):
        value, (ga, gb, gc) = result
        return [value, norm(sample(jask_file(ga))), norm(np.asarray(gb)), norm(np.asarray(gc))]

    return Trial(run, check)


def w4_numpy(ctx: Context) -> Trial:
    """One pass over row blocks of a: forward, backward, write the rows of da, accumulate db and dc."""
    a, t = ctx.mmap("x"), ctx.mmap("t")
    b, c = ctx.load("b"), ctx.load("c")
    ga = ctx.output("ga", a.shape)

    def run():
        loss, gb, gc = 0.0, np.zeros_like(b), np.zeros_like(c)
        for i, j in chunks(a.shape, ctx.budget // 4):
            ai = a[i:j]
            h = ai @ b
            r = h @ c - t[i:j]
            loss += float(np.square(r, dtype=np.float64).sum())
            gz = 2 * r
            gc += h.T @ gz
            gh = gz @ c.T
            gb += ai.T @ gh
            ga[i:j] = gh @ b.T
        flush(ga)
        return loss, ga, gb, gc

    return Trial(run, _w4_check)


def _w4_check(result) -> list[float]:
    value, ga, gb, gc = result
    return [value, norm(sample(ga)), norm(gb), norm(gc)]


def w4_dask(ctx: Context) -> Trial:
    import dask
    import dask.array as da

    rows = rows_per_chunk(ctx.plan["x"].shape, ctx.budget // 8)
    a, t = ctx.dask("x", rows), ctx.dask("t", rows)
    b, c = ctx.load("b"), ctx.load("c")
    h = a @ b
    r = h @ c - t
    gz = 2 * r
    gh = gz @ c.T
    loss, gb, gc = (r**2).sum(dtype=np.float64), a.T @ gh, h.T @ gz
    ga_expr = gh @ b.T

    def run():
        ga = ctx.output("ga", a.shape)
        stored = da.store(ga_expr, ga, lock=False, compute=False)
        _, value, gb_value, gc_value = dask.compute(stored, loss, gb, gc, scheduler="threads")
        flush(ga)
        return float(value), ga, gb_value, gc_value

    return Trial(run, _w4_check)


def w4_jax(ctx: Context) -> Trial:
    import jax
    import jax.numpy as jnp

    def loss(a, b, c, t):
        return jnp.sum(jnp.square(a @ b @ c - t))

    a, b, c, t = ctx.device("x"), ctx.device("b"), ctx.device("c"), ctx.device("t")
    f = compiled(jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))), a, b, c, t)

    def run():
        value, grads = jax.block_until_ready(f(a, b, c, t))
        return (float(value), *grads)

    return Trial(run, _w4_check)


# W5: one optax.adam step on parameters p with gradients g; state on disk. Timed after a warm-up step.


def adam_step(opt):
    """One jitted training-loop step as a user writes it: the update and its application."""
    import jax
    import optax

    @jax.jit
    def step(p, g, state):
        updates, state = opt.update(g, state, p)
        return optax.apply_updates(p, updates), state

    return lambda p, g, state: jax.block_until_ready(step(p, g, state))


def w5_jask(ctx: Context) -> Trial:
    ctx.jask()
    import optax

    opt = optax.adam(LR)
    p, g = ctx.disk("p"), ctx.disk("g")
    step = adam_step(opt)
    p1, warm = step(p, g, opt.init(p))  # compiles
    _, warm = step(
        p1, g, warm
    )  # a loop's steady state: its outputs' files are freed for the timed step
    del p1

    def run():
        p2, state = step(p, g, warm)
        fsync(p2.path, state[0].mu.path, state[0].nu.path)
        return p2, state[0].mu

    def check(result):
        p2, mu = result
        return [norm(sample(jask_file(p2)) - sample(ctx.mmap("p"))), norm(sample(jask_file(mu)))]

    return Trial(run, check, evict=[warm[0].mu.path, warm[0].nu.path])


def _adam_check(ctx: Context):
    def check(result):
        p2, mu = result
        return [norm(sample(p2) - sample(ctx.mmap("p"))), norm(sample(mu))]

    return check


def w5_numpy(ctx: Context) -> Trial:
    """The Adam update written out by hand, chunk by chunk; m and v updated in place in their files.

    Each step maps the files afresh: pages a mapping has touched stay mapped,
    and mapped pages cannot be evicted from the page cache before the timed step.
    """
    shape = ctx.plan["p"].shape
    paths = {name: ctx.output(name, shape).filename for name in ("m", "v", "p2")}

    def step(count):
        p, g = ctx.mmap("p"), ctx.mmap("g")
        m, v, p2 = (np.load(paths[name], mmap_mode="r+") for name in ("m", "v", "p2"))
        for i, j in chunks(shape, ctx.budget // 8):
            gi, mi, vi = g[i:j], m[i:j], v[i:j]
            mi *= B1
            mi += (1 - B1) * gi
            vi *= B2
            vi += (1 - B2) * np.square(gi)
            denom = np.sqrt(vi / (1 - B2**count))
            denom += EPS
            p2[i:j] = p[i:j] - LR * (mi / (1 - B1**count)) / denom
        flush(m, v, p2)
        return p2, m

    step(1)
    step(2)
    return Trial(lambda: step(3), _adam_check(ctx), evict=list(paths.values()))


def w5_dask(ctx: Context) -> Trial:
    """Each step builds its graph over fresh mappings of the files (see w5_numpy); state goes to new files."""
    import dask.array as da

    shape = ctx.plan["p"].shape
    rows = rows_per_chunk(shape, ctx.budget // 8)

    def step(m, v, count):
        p, g = ctx.dask("p", rows), ctx.dask("g", rows)
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g * g
        new_p = p - LR * (m / (1 - B1**count)) / (da.sqrt(v / (1 - B2**count)) + EPS)
        return store(ctx, **{f"m{count}": m, f"v{count}": v, f"p{count}": new_p})

    zeros = da.zeros(shape, np.float32, chunks=rows)
    first = [out.filename for out in step(zeros, zeros, 1)[:2]]
    warm = [out.filename for out in step(*(dask_file(path, (rows,)) for path in first), 2)[:2]]

    def run():
        m3, _, p3 = step(*(dask_file(path, (rows,)) for path in warm), 3)
        return p3, m3

    return Trial(run, _adam_check(ctx), evict=warm)


def w5_jax(ctx: Context) -> Trial:
    import optax

    opt = optax.adam(LR)
    p, g = ctx.device("p"), ctx.device("g")
    step = adam_step(opt)
    p1, warm = step(p, g, opt.init(p))
    _, warm = step(p1, g, warm)

    def run():
        p2, state = step(p, g, warm)
        return p2, state[0].mu

    return Trial(run, _adam_check(ctx))


@dataclass(frozen=True)
class Workload:
    """A benchmark: its inputs, its minimal traffic and flops, and its contenders.

    `limit_seconds(plan, limits)`, when set, is the workload's limit time, used by
    `harness.score` instead of the sequential-bytes formula (minimal bytes read / read_bps +
    written / write_bps, or flops / matmul_flops): W6 and W8 read rows at random, whose limit is
    bound by the disk's random-read rate. `limits` (from `measure_limits` / `final_limits` in
    bench/__main__.py) holds `read_bps`, `write_bps` and `matmul_flops`, and `random_read_iops`
    (4 KiB random O_DIRECT reads, 32 in flight) and `random_read_bps` (the same with 64 KiB
    requests), each the best of the probes before and after the workloads.
    """

    name: str
    title: str
    unit: str  # "GB/s" or "GFLOP/s"
    inputs: tuple[str, ...]
    cost: Callable[[dict[str, Array]], tuple[int, int, int]]  # (bytes read, bytes written, flops)
    contenders: dict[str, Callable[[Context], Trial]]
    # an input derived from the .npy inputs in another file format (bench/formats.py): its files
    # are what the contenders read, evict and are limited by
    derived: Any = None
    limit_seconds: Callable[[dict[str, Array], dict], float] | None = None
    # how many samples, passes or steps the timed part does, where the unit counts those
    # (throughput = items / seconds)
    items: Callable[[dict[str, Array]], int] | None = None

    # the inputs under a cap, where the plan has them (W3's: `arrays`)
    capped_inputs: tuple[str, ...] | None = None

    def input_names(self, plan: dict[str, Array]) -> tuple[str, ...]:
        """The inputs its contenders read under this plan."""
        if self.capped_inputs and all(n in plan for n in self.capped_inputs):
            return self.capped_inputs
        return self.inputs

    def input_bytes(self, plan: dict[str, Array]) -> int:
        return sum(plan[n].nbytes for n in self.input_names(plan))


def _w3_cost(plan):
    x, w = (plan[name] for name in w3_inputs(plan))
    (n, k), m = x.shape, w.shape[1]
    return x.nbytes + w.nbytes, 4 * n * m, 2 * n * k * m


def _w4_cost(plan):
    rows = plan["x"].shape[0]
    small = plan["b"].nbytes + plan["c"].nbytes
    flops = (
        6 * rows * (FEATURES * HIDDEN + HIDDEN * OUTPUTS)
    )  # forward, and two products per matmul backward
    return plan["x"].nbytes + plan["t"].nbytes + small, plan["x"].nbytes + small, flops


WORKLOADS = {
    w.name: w
    for w in [
        Workload(
            "W1",
            "fused reduction: sum(square(x - y))",
            "GB/s",
            ("x", "y"),
            lambda p: (p["x"].nbytes + p["y"].nbytes, 0, 0),
            {"jask": w1_jask, "numpy": w1_numpy, "dask": w1_dask, "jax": w1_jax},
        ),
        Workload(
            "W2",
            "elementwise map to disk: a * x + y",
            "GB/s",
            ("x", "y"),
            lambda p: (p["x"].nbytes + p["y"].nbytes, p["x"].nbytes, 0),
            {"jask": w2_jask, "numpy": w2_numpy, "dask": w2_dask, "jax": w2_jax},
        ),
        Workload(
            "W3",
            "out-of-core matmul: x @ w",
            "GFLOP/s",
            ("mx", "mw"),
            _w3_cost,
            {
                "jask": w3_jask,
                "numpy": w3_numpy,
                "dask": w3_dask,
                "jax": w3_jax,
                "numpy-mem": w3_numpy_in_memory,
            },
            capped_inputs=("mxc", "mwc"),
        ),
        Workload(
            "W4",
            "loss and gradients of sum(square(a @ b @ c - t)), a tall",
            "GB/s",
            ("x", "b", "c", "t"),
            _w4_cost,
            {"jask": w4_jask, "numpy": w4_numpy, "dask": w4_dask, "jax": w4_jax},
        ),
        Workload(
            "W5",
            "one optax.adam step, parameters and state on disk",
            "GB/s",
            ("p", "g"),
            lambda p: (4 * p["p"].nbytes, 3 * p["p"].nbytes, 0),
            {"jask": w5_jask, "numpy": w5_numpy, "dask": w5_dask, "jax": w5_jax},
        ),
    ]
}

# W1s, W1z: W1 over the same x and y in a safetensors file and a zstd Zarr group (they use the
# above); listed right after W1, so the tables show them together.
from .formats import FORMAT_WORKLOADS  # noqa: E402
from .training import TRAINING_WORKLOADS, training_arrays  # noqa: E402

WORKLOADS = {
    name: w
    for key, workload in WORKLOADS.items()
    for name, w in [(key, workload), *(FORMAT_WORKLOADS.items() if key == "W1" else [])]
}
WORKLOADS.update(TRAINING_WORKLOADS)
