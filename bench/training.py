"""W6-W8: the workloads users run, not kernels: a training epoch over a dataset on disk, inference
through layers whose weights are on disk, and embedding training with a table on disk.

Each contender does the same steps from the same seeds in the same order, so the check numbers
(losses, norms of the trained parameters or of the output) agree across contenders. The timed
part is a stated number of steps (W6, W8) or one forward pass (W7); the Workload's `items` is
how many samples, passes or steps that is, and its throughput is items per second.

Sizes follow the input size `size` (2 GiB by default): W6's dataset, W7's weights and W8's table
are each 2 * size bytes (4 GiB by default, 4x a 1 GiB memory cap), so `--quick` stays small.

Limits: the harness takes the larger of the time of the minimal traffic and of the flops at the
in-memory matmul rate (W7: weights bytes / read bandwidth vs 2 * batch * D * D * L flops; W8d:
table, m, v and the full gradient each read and written once at the sequential bandwidths).
W6 and W8 read rows at random, so their traffic's time is given by `limit_seconds`, at the disk's
random 4 KiB read rate with 32 in flight (`random_read_iops`):
- W6: each sample is one random read from the features file and one from the targets file:
  2B / random_read_iops per step of B samples.
- W8: each step reads and writes the B touched rows of the table and of adam's m and v (rows of
  512 B: one 4 KiB page each, two for the 1 in 8 that straddle a page): 3B random reads and 3B
  random writes, both at the random-read rate: 6B / random_read_iops per step.
"""

from __future__ import annotations

import math
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .workloads import (
    B1,
    B2,
    EPS,
    LR,
    SEED,
    Array,
    Context,
    Trial,
    Workload,
    compiled,
    fsync,
    norm,
    rows_per_chunk,
)

# W6: a 2-layer MLP over (rows, W6_FEATURES) features and (rows, W6_TARGETS) targets.
W6_FEATURES, W6_HIDDEN, W6_TARGETS = 256, 256, 16
W6_BATCH = 1024
W6_STEPS = 48  # timed steps (an epoch is rows / 1024 steps: the table projects its time)

# W7: L dense layers of D x D float32, applied to an in-memory (W7_BATCH, D) batch.
W7_BATCH = 128  # rows of 4096: the matmul reaches its in-memory rate (64 rows: 3/4 of it here)
W7_MAX_SIDE = 4096
W7_MIN_LAYERS = 8

# W8: a (rows, 128) embedding table; each step gathers W8_BATCH ids (duplicates possible).
W8_DIM = 128
W8_BATCH = 1024
W8_STEPS = 16
W8_DENSE_FRACTION = 16  # W8d's table is W8's / 16 (dense adam rewrites all of it every step)


def training_arrays(size: int) -> list[Array]:
    """The data files of W6-W8 for input size `size` (each dataset is 2 * size bytes)."""
    rows6 = max(4 * W6_BATCH, 2 * size // (4 * W6_FEATURES))
    side = w7_side(size)
    layers = max(W7_MIN_LAYERS, 2 * size // (4 * side * side))
    rows8 = max(4 * W8_BATCH, 2 * size // (4 * W8_DIM))
    return [
        Array("f6", (rows6, W6_FEATURES)),
        Array("t6", (rows6, W6_TARGETS)),
        Array("w7", (layers, side, side), math.sqrt(2 / side)),  # He init: activations keep scale
        Array("e8", (rows8, W8_DIM), 1 / math.sqrt(W8_DIM)),
        Array("e8d", (max(W8_BATCH, rows8 // W8_DENSE_FRACTION), W8_DIM), 1 / math.sqrt(W8_DIM)),
    ]


def w7_side(size: int) -> int:
    """4096, or the largest power of two that still gives W7_MIN_LAYERS layers in 2 * size bytes."""
    side = W7_MAX_SIDE
    while side > 64 and W7_MIN_LAYERS * 4 * side * side > 2 * size:
        side //= 2
    return side


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([SEED, *key])


# W6: a training epoch of a 2-layer MLP, mini-batches gathered at random rows of a dataset on disk.


def w6_batches(rows: int, steps: int) -> np.ndarray:
    """(steps, W6_BATCH) int32 row indices: consecutive batches of a seeded permutation per epoch,
    each batch sorted (the same samples; sorted reads are what a careful loader does)."""
    per_epoch = rows // W6_BATCH
    out = []
    for epoch in range(math.ceil(steps / per_epoch)):
        perm = _rng(6, epoch).permutation(rows)[: per_epoch * W6_BATCH]
        out.append(np.sort(perm.reshape(per_epoch, W6_BATCH), axis=1))
    return np.concatenate(out)[:steps].astype(np.int32)


def w6_steps(plan) -> int:
    return min(W6_STEPS, plan["f6"].shape[0] // W6_BATCH)


def mlp_init():
    """The MLP's parameters ((w1, b1), (w2, b2)) as jax.Arrays, seeded."""
    import jax.numpy as jnp

    rng = _rng(6, 1 << 20)
    w1 = rng.standard_normal((W6_FEATURES, W6_HIDDEN), np.float32) / np.float32(W6_FEATURES**0.5)
    w2 = rng.standard_normal((W6_HIDDEN, W6_TARGETS), np.float32) / np.float32(W6_HIDDEN**0.5)
    zeros = np.zeros
    return (
        (jnp.asarray(w1), jnp.asarray(zeros(W6_HIDDEN, np.float32))),
        (jnp.asarray(w2), jnp.asarray(zeros(W6_TARGETS, np.float32))),
    )


def mlp_step():
    """The training step every W6 contender runs: `step(params, state, x, t) -> (params, state, loss)`
    on an in-memory batch, and the optimizer whose state it carries."""
    import jax
    import jax.numpy as jnp
    import optax

    def loss(params, x, t):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean(jnp.square(h @ w2 + b2 - t))

    opt = optax.adam(LR)

    def step(params, state, x, t):
        value, grads = jax.value_and_grad(loss)(params, x, t)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    return opt, step


def _w6_trial(ctx: Context, step, batch) -> Trial:
    """Runs `step(params, state, i)` for each timed step i (its `batch(i)` gathers the rows)."""
    import jax

    opt, _ = mlp_step()
    params0 = mlp_init()
    state0 = opt.init(params0)

    def run():
        params, state, losses = params0, state0, []
        for i in range(w6_steps(ctx.plan)):
            params, state, loss = step(params, state, *batch(i))
            losses.append(loss)
        return jax.block_until_ready((params, losses))

    return Trial(run, _w6_check)


def _w6_check(result) -> list[float]:
    import jax

    params, losses = result
    leaves = [np.asarray(p, np.float64).ravel() for p in jax.tree.leaves(params)]
    return [float(np.mean(np.asarray(losses, np.float64))), norm(np.concatenate(leaves))]


def _w6_in_memory_step(ctx: Context, x_like, t_like):
    """The step compiled for an in-memory batch (the loader contenders)."""
    import jax

    opt, step = mlp_step()
    params = mlp_init()
    return compiled(jax.jit(step), params, opt.init(params), x_like, t_like)


def w6_jask(ctx: Context) -> Trial:
    """The dataset as DiskArrays; the batch gathered with `jask.take` inside the jitted step."""
    jask = ctx.jask()
    import jax
    import jax.numpy as jnp

    X, T = ctx.disk("f6"), ctx.disk("t6")
    opt, step = mlp_step()
    batches = jnp.asarray(w6_batches(X.shape[0], w6_steps(ctx.plan)))

    def gathered(params, state, X, T, idx):
        return step(params, state, jask.take(X, idx, axis=0), jask.take(T, idx, axis=0))

    params = mlp_init()
    f = compiled(jax.jit(gathered), params, opt.init(params), X, T, batches[0])
    return _w6_trial(ctx, lambda p, s, i: f(p, s, X, T, i), lambda i: (batches[i],))


def w6_numpy(ctx: Context) -> Trial:
    """A NumPy memmap loader: `X_mm[idx]` at the sorted batch indices, into the same jitted step.

    The mappings are made in the timed part: pages a mapping has touched (here, compiling on the
    first batch) cannot be evicted from the page cache."""
    X, T = ctx.mmap("f6"), ctx.mmap("t6")
    batches = w6_batches(X.shape[0], w6_steps(ctx.plan))
    f = _w6_in_memory_step(ctx, X[batches[0]], T[batches[0]])
    del X, T
    maps = {}

    def batch(i):
        if not maps:
            maps.update(X=ctx.mmap("f6"), T=ctx.mmap("t6"))
        return maps["X"][batches[i]], maps["T"][batches[i]]

    return _w6_trial(ctx, f, batch)


def w6_dask(ctx: Context) -> Trial:
    """`Xd[idx].compute()` on Dask arrays over the files (chunks of budget / 8, threaded scheduler)."""
    import dask

    X = ctx.dask("f6", rows_per_chunk(ctx.plan["f6"].shape, ctx.budget // 8))
    T = ctx.dask("t6", rows_per_chunk(ctx.plan["t6"].shape, ctx.budget // 8))
    batches = w6_batches(X.shape[0], w6_steps(ctx.plan))

    def batch(i):
        return dask.compute(X[batches[i]], T[batches[i]], scheduler="threads")

    f = _w6_in_memory_step(ctx, *batch(0))
    return _w6_trial(ctx, f, batch)


def w6_jax(ctx: Context) -> Trial:
    """The whole dataset in memory as jax.Arrays, the batch gathered inside the jitted step."""
    import jax
    import jax.numpy as jnp

    X, T = ctx.device("f6"), ctx.device("t6")
    opt, step = mlp_step()
    batches = jnp.asarray(w6_batches(X.shape[0], w6_steps(ctx.plan)))
    params = mlp_init()
    f = compiled(
        jax.jit(lambda p, s, X, T, idx: step(p, s, X[idx], T[idx])),
        params,
        opt.init(params),
        X,
        T,
        batches[0],
    )
    return _w6_trial(ctx, lambda p, s, i: f(p, s, X, T, i), lambda i: (batches[i],))


def w6_items(plan) -> int:
    return w6_steps(plan) * W6_BATCH


def w6_limit(plan, limits) -> float:
    return w6_steps(plan) * 2 * W6_BATCH / limits["random_read_iops"]


def _w6_cost(plan):
    samples = w6_items(plan)
    row_bytes = 4 * (W6_FEATURES + W6_TARGETS)
    flops = 6 * samples * (W6_FEATURES * W6_HIDDEN + W6_HIDDEN * W6_TARGETS)
    return samples * row_bytes, 0, flops


# W7: a forward pass through a stack of dense layers whose weights are on disk.


def w7_batch(side: int):
    import jax.numpy as jnp

    return jnp.asarray(_rng(7).standard_normal((W7_BATCH, side), np.float32))


def _w7_layer():
    import jax

    return jax.jit(lambda h, w: jax.nn.relu(h @ w))


def _w7_check(h) -> list[float]:
    h = np.asarray(h, np.float64)
    return [norm(h), float(h.mean())]


def w7_jask(ctx: Context) -> Trial:
    """The stack as one DiskArray (L, D, D), `jax.lax.scan` over its layers inside `jax.jit`, as a
    user writes it: the body gets each layer in memory, and the engine reads the next layer
    while this one computes (its readahead)."""
    ctx.jask()
    import jax

    W = ctx.disk("w7")
    h0 = w7_batch(W.shape[1])

    def forward(W, h):
        return jax.lax.scan(lambda h, w: (jax.nn.relu(h @ w), None), h, W)[0]

    f = compiled(jax.jit(forward), W, h0)
    return Trial(lambda: jax.block_until_ready(f(W, h0)), _w7_check)


def streamed_forward(load, layers: int, h):
    """W7's loop over layers loaded by `load(i)`, layer i + 1 read by a thread while layer i computes
    (two layers in memory at a time, as FlexGen and AirLLM stream them)."""
    import jax
    import jax.numpy as jnp

    layer = _w7_layer()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(load, 0)
        for i in range(layers):
            w = jnp.asarray(pending.result())
            if i + 1 < layers:
                pending = pool.submit(load, i + 1)
            h = layer(h, w)
        return jax.block_until_ready(h)


def _w7_streamed(ctx: Context, load, layers: int) -> Trial:
    import jax.numpy as jnp

    h0 = w7_batch(ctx.plan["w7"].shape[1])
    layer = _w7_layer()
    layer(h0, jnp.zeros(ctx.plan["w7"].shape[1:], jnp.float32)).block_until_ready()  # compiles
    return Trial(lambda: streamed_forward(load, layers, h0), _w7_check)


def w7_numpy(ctx: Context) -> Trial:
    """numpy.memmap of the stack; `jnp.asarray(W_mm[i])` per layer, the next layer read by a thread."""
    W = ctx.mmap("w7")
    return _w7_streamed(ctx, lambda i: np.array(W[i]), W.shape[0])


def w7_safetensors_path(ctx: Context) -> str:
    return os.path.join(ctx.data_dir, ctx.plan["w7"].filename.replace(".npy", ".safetensors"))


def w7_safetensors_file(ctx: Context) -> str:
    """The stack as one safetensors file of tensors "layers.{i}.weight", written once from the .npy
    by `jask.save_safetensors` (streamed within the budget) and reused; other sizes' files removed."""
    path = w7_safetensors_path(ctx)
    for name in os.listdir(ctx.data_dir):
        stale = os.path.join(ctx.data_dir, name)
        if name.startswith("w7-") and ".safetensors" in name and stale != path:
            os.remove(stale)
    if not os.path.exists(path):
        jask = ctx.jask()
        W = ctx.disk("w7")
        partial = path + ".partial"
        jask.save_safetensors(partial, {f"layers.{i}.weight": W[i] for i in range(W.shape[0])})
        fsync(partial)
        os.replace(partial, path)
    return path


def w7_safetensors(ctx: Context) -> Trial:
    """safetensors' own loading: `safe_open(path, framework="numpy").get_tensor` per layer, the next
    layer read by a thread."""
    from safetensors import safe_open

    path = w7_safetensors_file(ctx)
    opened = {}

    def load(i):
        if not opened:  # in the timed part: the mapping of the header would stay cached
            opened["f"] = safe_open(path, framework="numpy")
        return opened["f"].get_tensor(f"layers.{i}.weight")

    trial = _w7_streamed(ctx, load, ctx.plan["w7"].shape[0])
    trial.evict.append(path)
    return trial


def w7_jax(ctx: Context) -> Trial:
    """The stack in memory as a jax.Array; `lax.scan` over its layers inside `jax.jit`."""
    import jax

    W = ctx.device("w7")
    h0 = w7_batch(W.shape[1])
    f = compiled(
        jax.jit(lambda W, h: jax.lax.scan(lambda h, w: (jax.nn.relu(h @ w), None), h, W)[0]), W, h0
    )
    return Trial(lambda: jax.block_until_ready(f(W, h0)), _w7_check)


def _w7_cost(plan):
    layers, side, _ = plan["w7"].shape
    return plan["w7"].nbytes, 0, 2 * W7_BATCH * side * side * layers


# W8: embedding training; each step gathers rows of a table on disk, and adam updates them.


def w8_stream(rows: int, steps: int):
    """(steps, W8_BATCH) int32 ids (duplicates possible) and their (steps, W8_BATCH) targets, seeded."""
    rng = _rng(8)
    ids = rng.integers(0, rows, (steps, W8_BATCH), dtype=np.int32)
    return ids, rng.standard_normal((steps, W8_BATCH), np.float32)


def w8_loss(rows, w, y):
    """A dot-product regression: each row's score against the in-memory vector w."""
    import jax.numpy as jnp

    return jnp.mean(jnp.square(rows @ w - y))


def w8_init():
    import jax.numpy as jnp

    return jnp.asarray(_rng(8, 1).standard_normal(W8_DIM, np.float32) / np.float32(W8_DIM**0.5))


def w8_grads():
    """loss, (d loss / d rows, d loss / d w) and w's adam update, jitted: every sparse contender's math."""
    import jax
    import optax

    opt = optax.adam(LR)

    @jax.jit
    def grads(rows, w, wstate, y):
        loss, (grow, gw) = jax.value_and_grad(w8_loss, argnums=(0, 1))(rows, w, y)
        updates, wstate = opt.update(gw, wstate, w)
        return loss, grow, optax.apply_updates(w, updates), wstate

    return opt, grads


def _w8_table_copy(ctx: Context, name: str = "e8") -> str:
    """The table a run trains in place: a working copy of the data file beside it, made once and
    reused (copying 4 GiB per run cost more than the run). Training touches only the rows of the
    seeded id stream, so each run first restores from the data file the rows listed in the
    copy's record (what the run before may have changed, whether it finished, timed out or was
    killed), then records the rows it will change: every run starts from the data file's values.
    The record also names the data file's size and mtime; a regenerated data file is copied anew."""
    source = ctx.path(name)
    path, record = source[:-4] + ".work.npy", source[:-4] + ".work-rows.npz"
    st = os.stat(source)
    stamp = np.array([st.st_size, st.st_mtime_ns], np.int64)
    previous = None
    if os.path.exists(path) and os.path.exists(record):
        with np.load(record) as r:
            if np.array_equal(r["source"], stamp):
                previous = r["rows"]
    if previous is None:
        partial = path + ".partial"
        shutil.copyfile(source, partial)
        fsync(partial)
        os.replace(partial, path)
        previous = np.zeros(0, np.int64)
    ids, _ = w8_stream(ctx.plan[name].shape[0], _w8_steps(name))
    rows = np.unique(ids).astype(np.int64)
    restore = np.union1d(previous, rows)
    # row by row with pread/pwrite: through a mapping, the kernel maps 64 KiB around each row
    # read, which made the process's peak RSS 1 GiB for 8 MiB of rows
    offset, row_bytes = ctx.mmap(name).offset, ctx.plan[name].nbytes // ctx.plan[name].shape[0]
    with open(source, "rb") as src, open(path, "r+b") as dst:
        for row in restore.tolist():
            at = offset + row * row_bytes
            os.pwrite(dst.fileno(), os.pread(src.fileno(), row_bytes, at), at)
    fsync(path)
    partial = record + ".partial.npz"
    np.savez(partial, source=stamp, rows=rows)
    fsync(partial)
    os.replace(partial, record)
    return path


def _w8_check(ctx: Context, name: str = "e8"):
    """Mean loss, |w|, and the norm of the change of the rows the last step touched."""

    def check(result):
        losses, w, last_rows = result
        ids, _ = w8_stream(ctx.plan[name].shape[0], _w8_steps(name))
        before = ctx.mmap(name)[np.sort(ids[-1])]
        return [
            float(np.mean(np.asarray(losses, np.float64))),
            norm(w),
            norm(np.asarray(last_rows, np.float64) - before),
        ]

    return check


def _w8_steps(name: str) -> int:
    return W8_STEPS if name == "e8" else 1


def w8_jask(ctx: Context) -> Trial:
    """The table a DiskArray, `jask.row_sparse(optax.adam)`: each step reads and writes only the
    touched rows of the table and of m and v, in place, inside one jitted step."""
    jask = ctx.jask()
    import jax
    import jax.numpy as jnp
    import optax

    table = jask.DiskArray.open(_w8_table_copy(ctx), mode="r+")
    ids, ys = w8_stream(table.shape[0], W8_STEPS)
    ids, ys = jnp.asarray(ids), jnp.asarray(ys)
    opt = jask.row_sparse(optax.adam(LR))
    state = opt.init(table)
    wopt = optax.adam(LR)
    w0 = w8_init()

    def step(table, state, w, wstate, idx, y):
        rows = jask.take(table, idx, axis=0)
        loss, (grow, gw) = jax.value_and_grad(w8_loss, argnums=(0, 1))(rows, w, y)
        table, state = opt.update_(table, state, idx, grow)
        updates, wstate = wopt.update(gw, wstate, w)
        return table, state, optax.apply_updates(w, updates), wstate, loss

    f = compiled(jax.jit(step), table, state, w0, wopt.init(w0), ids[0], ys[0])

    def run():
        t, s, w, ws, losses = table, state, w0, wopt.init(w0), []
        for i in range(W8_STEPS):
            t, s, w, ws, loss = f(t, s, w, ws, ids[i], ys[i])
            losses.append(loss)
        jax.block_until_ready((w, losses))
        fsync(table.path, *(leaf.path for leaf in jax.tree.leaves(s) if hasattr(leaf, "path")))
        return losses, w, np.load(table.path, mmap_mode="r")[np.sort(np.asarray(ids[-1]))]

    return Trial(run, _w8_check(ctx), evict=[table.path])


def w8_numpy(ctx: Context) -> Trial:
    """numpy.memmap table, m and v; lazy adam by hand: fancy-index read the touched rows, update,
    write back in place; the row gradients from the same jitted function; flush + fsync at the end."""
    path = _w8_table_copy(ctx)
    shape = ctx.plan["e8"].shape
    moments = [os.path.join(ctx.out_dir, f"{name}.npy") for name in ("m", "v")]
    for moment in moments:  # zeros: the files' blocks are allocated as the steps write them
        np.lib.format.open_memmap(moment, "w+", np.float32, shape).flush()
    ids, ys = w8_stream(shape[0], W8_STEPS)
    wopt, grads = w8_grads()
    w0 = w8_init()
    grads(np.zeros((W8_BATCH, W8_DIM), np.float32), w0, wopt.init(w0), ys[0])  # compiles

    def run():
        # mapped in the timed part: pages a mapping has touched cannot be evicted before it
        table = np.load(path, mmap_mode="r+")
        m, v = (np.load(moment, mmap_mode="r+") for moment in moments)
        w, wstate, losses = w0, wopt.init(w0), []
        for i in range(W8_STEPS):
            loss, grow, w, wstate = grads(table[ids[i]], w, wstate, ys[i])
            losses.append(loss)
            uniq, inverse = np.unique(ids[i], return_inverse=True)
            g = np.zeros((uniq.size, W8_DIM), np.float32)
            np.add.at(g, inverse, np.asarray(grow))
            count = i + 1
            mu = B1 * m[uniq] + (1 - B1) * g
            nu = B2 * v[uniq] + (1 - B2) * np.square(g)
            m[uniq], v[uniq] = mu, nu
            table[uniq] -= LR * (mu / (1 - B1**count)) / (np.sqrt(nu / (1 - B2**count)) + EPS)
        for out in (table, m, v):
            out.flush()
        fsync(path, *moments)
        return losses, np.asarray(w), table[np.sort(ids[-1])]

    return Trial(run, _w8_check(ctx), evict=[path])


def w8_jax(ctx: Context) -> Trial:
    """Table, m and v in memory; the touched rows updated with `.at[ids]` in a jitted step that
    donates them (the same lazy adam: untouched rows and their moments stay as they are)."""
    import jax
    import jax.numpy as jnp

    table = ctx.device("e8")
    m, v = jnp.zeros_like(table), jnp.zeros_like(table)
    ids, ys = w8_stream(table.shape[0], W8_STEPS)
    ids, ys = jnp.asarray(ids), jnp.asarray(ys)
    wopt, grads = w8_grads()
    rows_total = table.shape[0]

    def step(table, m, v, count, w, wstate, idx, y):
        loss, grow, w, wstate = grads(table[idx], w, wstate, y)
        uniq, inverse = jnp.unique(idx, return_inverse=True, size=W8_BATCH, fill_value=rows_total)
        g = jnp.zeros((W8_BATCH, W8_DIM), jnp.float32).at[inverse.ravel()].add(grow)
        mu = B1 * m.at[uniq].get(mode="fill", fill_value=0) + (1 - B1) * g
        nu = B2 * v.at[uniq].get(mode="fill", fill_value=0) + (1 - B2) * jnp.square(g)
        rows = table.at[uniq].get(mode="fill", fill_value=0)
        update = LR * (mu / (1 - B1**count)) / (jnp.sqrt(nu / (1 - B2**count)) + EPS)
        table = table.at[uniq].set(rows - update, mode="drop")
        return (
            table,
            m.at[uniq].set(mu, mode="drop"),
            v.at[uniq].set(nu, mode="drop"),
            w,
            wstate,
            loss,
        )

    w0 = w8_init()
    count = jnp.float32(1)
    f = compiled(
        jax.jit(step, donate_argnums=(0, 1, 2)),
        table,
        m,
        v,
        count,
        w0,
        wopt.init(w0),
        ids[0],
        ys[0],
    )
    state = {"table": table, "m": m, "v": v}

    def run():
        t, mm, vv = state.pop("table"), state.pop("m"), state.pop("v")  # donated: used once
        w, wstate, losses = w0, wopt.init(w0), []
        for i in range(W8_STEPS):
            t, mm, vv, w, wstate, loss = f(t, mm, vv, jnp.float32(i + 1), w, wstate, ids[i], ys[i])
            losses.append(loss)
        jax.block_until_ready((t, losses))
        return losses, w, t[jnp.sort(ids[-1])]

    return Trial(run, _w8_check(ctx))


def w8_limit(plan, limits) -> float:
    return W8_STEPS * 6 * W8_BATCH / limits["random_read_iops"]


def _w8_cost(plan):
    touched = 3 * W8_STEPS * W8_BATCH * 4 * W8_DIM  # rows of table, m and v
    return touched, touched, 0


# W8d: one dense optax.adam step on a table on disk (jax.grad w.r.t. the whole table).


def w8d_jask(ctx: Context) -> Trial:
    """`jax.grad` with respect to the DiskArray table gives a full-table gradient; optax.adam
    rewrites table, m and v: one step, after `opt.init`."""
    jask = ctx.jask()
    import jax
    import jax.numpy as jnp
    import optax

    table = ctx.disk("e8d")
    ids, ys = w8_stream(table.shape[0], 1)
    idx, y = jnp.asarray(ids[0]), jnp.asarray(ys[0])
    opt, wopt = optax.adam(LR), optax.adam(LR)
    state = opt.init(table)
    w0 = w8_init()

    def step(table, state, w, wstate, idx, y):
        def loss(table, w):
            return w8_loss(jask.take(table, idx, axis=0), w, y)

        value, (gt, gw) = jax.value_and_grad(loss, argnums=(0, 1))(table, w)
        updates, state = opt.update(gt, state, table)
        wupdates, wstate = wopt.update(gw, wstate, w)
        return (
            optax.apply_updates(table, updates),
            state,
            optax.apply_updates(w, wupdates),
            value,
        )

    f = compiled(jax.jit(step), table, state, w0, wopt.init(w0), idx, y)

    def run():
        t, s, w, loss = jax.block_until_ready(f(table, state, w0, wopt.init(w0), idx, y))
        fsync(t.path, *(leaf.path for leaf in jax.tree.leaves(s) if hasattr(leaf, "path")))
        return [loss], w, np.load(t.path, mmap_mode="r")[np.sort(ids[0])]

    return Trial(run, _w8_check(ctx, "e8d"))


def w8d_jax(ctx: Context) -> Trial:
    """The same dense step with table, m and v in memory."""
    import jax
    import jax.numpy as jnp
    import optax

    table = ctx.device("e8d")
    ids, ys = w8_stream(table.shape[0], 1)
    idx, y = jnp.asarray(ids[0]), jnp.asarray(ys[0])
    opt, wopt = optax.adam(LR), optax.adam(LR)
    w0 = w8_init()

    def step(table, state, w, wstate, idx, y):
        value, (gt, gw) = jax.value_and_grad(lambda t, w: w8_loss(t[idx], w, y), argnums=(0, 1))(
            table, w
        )
        updates, state = opt.update(gt, state, table)
        wupdates, wstate = wopt.update(gw, wstate, w)
        return optax.apply_updates(table, updates), state, optax.apply_updates(w, wupdates), value

    state = opt.init(table)
    f = compiled(jax.jit(step), table, state, w0, wopt.init(w0), idx, y)

    def run():
        t, _, w, loss = jax.block_until_ready(f(table, state, w0, wopt.init(w0), idx, y))
        return [loss], w, t[jnp.sort(idx)]

    return Trial(run, _w8_check(ctx, "e8d"))


def _w8d_cost(plan):
    # reads the table, m and v, writes and reads back the gradient, writes table, m and v
    table = plan["e8d"].nbytes
    return 4 * table, 4 * table, 0


TRAINING_WORKLOADS = {
    w.name: w
    for w in [
        Workload(
            "W6",
            f"training epoch: 2-layer MLP ({W6_FEATURES}-{W6_HIDDEN}-{W6_TARGETS}, relu, adam) over "
            f"random mini-batches of {W6_BATCH}; {W6_STEPS} steps timed "
            "(time per epoch = rows / samples/s)",
            "samples/s",
            ("f6", "t6"),
            _w6_cost,
            {
                "jask": w6_jask,
                "numpy": w6_numpy,
                "dask": w6_dask,
                "jax": w6_jax,
            },
            limit_seconds=w6_limit,
            items=w6_items,
        ),
        Workload(
            "W7",
            f"layer-streamed inference: relu(h @ W[i]) over the layers, batch {W7_BATCH}, one pass",
            "passes/s",
            ("w7",),
            _w7_cost,
            {
                "jask": w7_jask,
                "numpy": w7_numpy,
                "safetensors": w7_safetensors,
                "jax": w7_jax,
            },
            items=lambda plan: 1,
        ),
        Workload(
            "W8",
            f"embedding training, row-sparse adam: {W8_STEPS} steps of {W8_BATCH} ids",
            "steps/s",
            ("e8",),
            _w8_cost,
            {"jask": w8_jask, "numpy": w8_numpy, "jax": w8_jax},
            limit_seconds=w8_limit,
            items=lambda plan: W8_STEPS,
        ),
        Workload(
            "W8d",
            f"embedding training, dense adam (full-table gradient), table W8's / {W8_DENSE_FRACTION}: "
            "1 step",
            "steps/s",
            ("e8d",),
            _w8d_cost,
            {"jask": w8d_jask, "jax": w8d_jax},
            items=lambda plan: 1,
        ),
    ]
}
