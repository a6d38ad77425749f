"""One process of the data-parallel runs of tests/test_distributed.py (run by jask.launch).

    python -m jask.launch -n N worker.py DATA OUT [--checks] [--steps K] [--ckpt DIR]
        [--resume] [--die-rank R --die-at S]

DATA holds the datasets the test wrote: seed_a-{rank}.npy (the seed pipeline's `a`, one file per
process), seed_t.npy (its target, one shared file), mlp_x-{rank}.npy and mlp_y.npy. Each process
writes what it computed to OUT/rank-{rank}.npz; process 0 appends each training step's loss to
OUT/losses.jsonl as the step ends. The test computes the one-process references itself.

--checks adds the seed pipeline's gradients, a DiskArray gradient all-reduced block by block
(at a small memory budget) and a DiskArray weight trained with optax.adam before the training
run. --die-rank R --die-at S makes process R exit with os._exit(17) at the start of step S, after
writing the time to OUT/died_at.txt.
"""

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jask
import jask.distributed as jd

SEED_B_SHAPE, SEED_C_SHAPE = (6, 4), (4, 3)
MLP_HIDDEN, LR = 16, 0.02
DIE_CODE = 17


def seed_params():
    rng = np.random.default_rng(1)
    return (
        rng.random(SEED_B_SHAPE, dtype=np.float32),
        rng.random(SEED_C_SHAPE, dtype=np.float32),
    )


def mse_loss(a, b, c, target):
    z = jask.dot(jask.dot(a, b), c)
    return jask.sum(jask.square(jask.sub(z, target)))


def mlp_init(features, outputs):
    rng = np.random.default_rng(2)
    w1 = rng.standard_normal((features, MLP_HIDDEN), np.float32) / np.sqrt(features)
    w2 = rng.standard_normal((MLP_HIDDEN, outputs), np.float32) / np.sqrt(MLP_HIDDEN)
    return {
        "w1": jnp.asarray(w1),
        "b1": jnp.zeros(MLP_HIDDEN, jnp.float32),
        "w2": jnp.asarray(w2.astype(np.float32)),
        "b2": jnp.zeros(outputs, jnp.float32),
    }


def mlp_sse(params, x, y):
    """The sum of squared errors over the rows of x (DiskArrays or in-memory arrays)."""
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.sum(jnp.square(h @ params["w2"] + params["b2"] - y))


def seed_checks(data, out):
    a = jd.open_shard(os.path.join(data, "seed_a-{rank}.npy"))
    t = jd.open_shard(os.path.join(data, "seed_t.npy"))
    assert (a.start, a.stop) == (t.start, t.stop), (a, t)
    b, c = seed_params()
    grads = jax.jit(jax.value_and_grad(mse_loss, argnums=(0, 1, 2)))
    loss, (ga, gb, gc) = grads(a.local, b, c, t.local)
    loss, gb, gc = jd.allreduce((loss, gb, gc), "sum")
    out.update(
        seed_loss=np.asarray(loss),
        seed_ga=np.asarray(ga),  # this process's rows of the gradient of a (a is sharded)
        seed_gb=np.asarray(gb),
        seed_gc=np.asarray(gc),
        seed_rows=np.array([a.start, a.stop, *a.global_shape]),
        seed_b=b,
        seed_c=c,
    )


def format_checks(data, out):
    """Shards of other formats: rows of one safetensors tensor every process reads (a view at
    their offset), and one safetensors file per process opened by a function of the rank."""
    a = jd.open_shard(os.path.join(data, "seed_a-{rank}.npy"))
    shared = jd.open_shard(jask.open_safetensors(os.path.join(data, "seed.safetensors"))["a"])
    x = jd.open_shard(os.path.join(data, "mlp_x-{rank}.npy"))
    own = jd.open_shard(
        lambda rank: jask.open_safetensors(os.path.join(data, f"mlp_x-{rank}.safetensors"))["x"]
    )
    out.update(
        format_shared_rows=np.array([shared.start, shared.stop, a.start, a.stop]),
        format_shared_equal=np.array(np.array_equal(np.asarray(shared.local), np.asarray(a.local))),
        format_own_rows=np.array([own.start, own.stop, x.start, x.stop, *own.global_shape]),
        format_own_equal=np.array(np.array_equal(np.asarray(own.local), np.asarray(x.local))),
    )


def blockwise_checks(data, out):
    """The gradient of a DiskArray weight, all-reduced 512 bytes at a time (many blocks)."""
    x = jd.open_shard(os.path.join(data, "mlp_x-{rank}.npy"))
    y = jd.open_shard(os.path.join(data, "mlp_y.npy"))
    rng = np.random.default_rng(3)
    w = jask.DiskArray.from_numpy(rng.standard_normal((x.local.shape[1], 29), np.float32))
    proj = jnp.asarray(rng.standard_normal((y.local.shape[1], 29), np.float32))
    g = jax.jit(jax.grad(lambda w, x, y: jnp.sum(jnp.square(x @ w - y @ proj))))(
        w, x.local, y.local
    )
    assert isinstance(g, jask.DiskArray), type(g)
    budget = jask.memory_budget()
    jask.set_memory_budget(2800)  # allreduce's blocks: an eighth, 350 bytes: 3 rows of 29 floats
    try:
        summed = jd.allreduce(g, "sum")
        mean = jd.allreduce({"g": g, "scale": jnp.float32(jd.process_id())}, "mean")
    finally:
        jask.set_memory_budget(budget)
    assert isinstance(summed, jask.DiskArray) and isinstance(mean["g"], jask.DiskArray)
    out.update(
        block_local=np.asarray(g),
        block_sum=np.asarray(summed),
        block_sum_in_memory=np.asarray(jd.allreduce(jask.materialize(g), "sum")),
        block_mean=np.asarray(mean["g"]),
        block_scale=np.asarray(mean["scale"]),
        block_max=np.asarray(jd.allreduce(g, "max", block_bytes=120)),
    )


def disk_param_training(data, out, steps=3):
    """A weight that is a DiskArray, trained data-parallel with optax.adam: each step's local
    gradient is a DiskArray, all-reduced block by block, and the update (state on disk too) runs
    on every process alike."""
    x = jd.open_shard(os.path.join(data, "mlp_x-{rank}.npy"))
    y = jd.open_shard(os.path.join(data, "mlp_y.npy"))
    w0 = np.random.default_rng(4).standard_normal((x.global_shape[1], y.global_shape[1]))
    w = jask.DiskArray.from_numpy(w0.astype(np.float32))
    scale = 1.0 / (x.num_rows * y.global_shape[1])
    grad = jax.jit(jax.grad(lambda w, x, y: jnp.sum(jnp.square(x @ w - y)) * scale))
    opt = optax.adam(LR)

    @jax.jit
    def apply_update(w, state, g):
        updates, state = opt.update(g, state, w)
        return optax.apply_updates(w, updates), state

    state = opt.init(w)
    budget = jask.memory_budget()
    for _ in range(steps):
        g = grad(w, x.local, y.local)
        jask.set_memory_budget(4096)  # the all-reduce in blocks of 512 bytes: 64 floats
        try:
            g = jd.allreduce(g, "sum")
        finally:
            jask.set_memory_budget(budget)
        w, state = apply_update(w, state, g)
    assert isinstance(w, jask.DiskArray) and isinstance(state[0].mu, jask.DiskArray)
    out.update(disk_w0=w0.astype(np.float32), disk_w=np.asarray(w), disk_steps=np.array(steps))


def train(data, out_dir, out, args):
    x = jd.open_shard(os.path.join(data, "mlp_x-{rank}.npy"))
    y = jd.open_shard(os.path.join(data, "mlp_y.npy"))
    scale = 1.0 / (x.num_rows * y.global_shape[1])  # this process's part of the global mean

    @jax.jit
    def local_value_and_grad(params, x, y):
        return jax.value_and_grad(lambda p: mlp_sse(p, x, y) * scale)(params)

    opt = optax.adam(LR)

    @jax.jit
    def apply_update(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params = mlp_init(x.global_shape[1], y.global_shape[1])
    out.update({f"init_{k}": np.asarray(v) for k, v in params.items()})
    state = opt.init(params)
    first = 0
    if args.resume:
        like = {"params": params, "state": state, "step": 0}
        saved = jask.load_tree(args.ckpt, like=like)
        params, state, first = saved["params"], saved["state"], saved["step"] + 1
    losses = []
    for step in range(first, args.steps):
        if jd.process_id() == args.die_rank and step == args.die_at:
            with open(os.path.join(out_dir, "died_at.txt"), "w") as f:
                f.write(repr(time.time()))  # the wall clock: the test times the launcher from it
            os._exit(DIE_CODE)
        loss, grads = local_value_and_grad(params, x.local, y.local)
        loss, grads = jd.allreduce((loss, grads), "sum")
        params, state = apply_update(params, state, grads)
        losses.append(float(loss))
        if jd.process_id() == 0:  # the loss first: a step checkpointed has its loss recorded
            with open(os.path.join(out_dir, "losses.jsonl"), "a") as f:
                f.write(json.dumps({"step": step, "loss": float(loss)}) + "\n")
            if args.ckpt:
                jask.save_tree(args.ckpt, {"params": params, "state": state, "step": step})
    out.update(
        train_losses=np.array(losses),
        **{f"train_{k}": np.asarray(v) for k, v in params.items()},
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--checks", action="store_true")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--ckpt")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--die-at", type=int, default=-1)
    args = p.parse_args()
    jd.initialize()
    jask.set_progress(False)
    out = {"num_processes": np.array(jd.num_processes())}
    if args.checks:
        seed_checks(args.data, out)
        format_checks(args.data, out)
        blockwise_checks(args.data, out)
        disk_param_training(args.data, out)
    train(args.data, args.out, out, args)
    np.savez(os.path.join(args.out, f"rank-{jd.process_id()}.npz"), **out)


if __name__ == "__main__":
    main()
