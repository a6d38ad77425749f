"""Fine-tuning an MLP whose weights are a sharded safetensors checkpoint larger than the memory budget.

The checkpoint is written with jask.save_safetensors (shards of --shard-size
bytes and a model.safetensors.index.json, as Hugging Face writes them),
opened in place with jask.open_safetensors (every tensor a DiskArray over
its bytes in a shard: nothing is loaded), and trained with jitted
loss + gradient + optax.adamw steps on in-memory batches of a synthetic
regression task (a fixed random "teacher" network). The result is saved as a
new checkpoint, reopened, and one forward pass of it is checked against the
same pass on the trained parameters held in memory.

    python examples/finetune_safetensors.py --hidden 1024 --layers 4 --budget 4MB
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jask


def init_params(rng, sizes: list[int]) -> dict:
    """He-initialised dense layers: {"layers": [{"w": (m, n), "b": (n,)}, ...]} (NumPy float32)."""
    layers = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((m, n)) * np.sqrt(2.0 / m)
        layers.append({"w": w.astype(np.float32), "b": np.zeros(n, np.float32)})
    return {"layers": layers}


def forward(params: dict, x, layers: int):
    """The MLP on a flat dict as open_safetensors returns it: "layers.0.w", "layers.0.b", ..."""
    for i in range(layers):
        x = x @ params[f"layers.{i}.w"] + params[f"layers.{i}.b"]
        if i < layers - 1:
            x = jax.nn.relu(x)
    return x


def make_teacher(rng, inputs: int, outputs: int):
    a = rng.standard_normal((inputs, 32)).astype(np.float32) / np.sqrt(inputs)
    b = rng.standard_normal((32, outputs)).astype(np.float32)

    def batch(size: int):
        x = rng.standard_normal((size, inputs)).astype(np.float32)
        return x, np.tanh(x @ a) @ b

    return batch


def make_step(optimizer, layers: int):
    def loss_fn(params, x, y):
        return jnp.mean(jnp.square(forward(params, x, layers) - y))

    @jax.jit
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--outputs", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4, help="dense layers, each with a bias")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--budget", default="4MB")
    parser.add_argument("--shard-size", default="2MB", help="max_shard_size of both checkpoints")
    parser.add_argument(
        "--dir", default=None, help="folder for the checkpoints (kept); default: a temporary one"
    )
    parser.add_argument(
        "--dump-final",
        default=None,
        help="also write the trained parameters, read from the arrays in memory, to this .npz",
    )
    args = parser.parse_args(argv)

    jask.set_memory_budget(args.budget)
    if args.dir:
        return run(args, args.dir)
    with tempfile.TemporaryDirectory(prefix="jask-finetune-", dir=".") as folder:
        return run(args, folder)


def run(args, folder: str) -> int:
    rng = np.random.default_rng(0)
    sizes = [args.inputs] + [args.hidden] * (args.layers - 1) + [args.outputs]
    initial_dir, tuned_dir = os.path.join(folder, "initial"), os.path.join(folder, "finetuned")
    jask.save_safetensors(
        initial_dir,
        init_params(rng, sizes),
        max_shard_size=args.shard_size,
        metadata={"format": "np"},
    )
    params = jask.open_safetensors(initial_dir)
    shards = sum(name.endswith(".safetensors") for name in os.listdir(initial_dir))
    nbytes = sum(p.nbytes for p in params.values())
    print(
        f"checkpoint: {len(params)} tensors, {nbytes:,} bytes in {shards} shards ({initial_dir}); "
        f"budget {jask.memory_budget():,} bytes"
    )

    optimizer = optax.adamw(args.learning_rate, weight_decay=1e-4)
    opt_state = optimizer.init(params)
    step = make_step(optimizer, args.layers)
    batch = make_teacher(rng, args.inputs, args.outputs)
    losses = []
    started = time.perf_counter()
    for i in range(args.steps):
        x, y = batch(args.batch_size)
        params, opt_state, loss = step(params, opt_state, x, y)
        losses.append(float(loss))
        print(f"step {i}: loss = {losses[-1]:.6f}")
    print(f"{args.steps} steps in {time.perf_counter() - started:.1f} s")

    jask.save_safetensors(
        tuned_dir, params, max_shard_size=args.shard_size, metadata={"format": "np"}
    )
    in_memory = {name: jnp.asarray(np.asarray(p)) for name, p in params.items()}
    if args.dump_final:
        np.savez(args.dump_final, **{name: np.asarray(p) for name, p in in_memory.items()})
    reopened = jask.open_safetensors(tuned_dir)
    x, _ = batch(args.batch_size)
    saved_out = np.asarray(forward(reopened, x, args.layers))
    memory_out = np.asarray(forward(in_memory, x, args.layers))
    same = np.allclose(saved_out, memory_out, rtol=1e-4, atol=1e-5)
    print(
        "the saved checkpoint's forward pass matches the trained parameters'"
        if same
        else "the saved checkpoint's forward pass DIFFERS from the trained parameters'"
    )
    fell = losses[-1] < 0.5 * losses[0]
    print(
        f"loss fell from {losses[0]:.6f} to {losses[-1]:.6f}" if fell else "the loss did NOT fall"
    )
    return 0 if same and fell else 1


if __name__ == "__main__":
    raise SystemExit(main())
