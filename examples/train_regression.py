"""Linear regression trained with optax.adam on a data set that does not fit in the memory budget.

The features and targets are written to .npy files chunk by chunk, opened as
DiskArrays, and streamed in mini-batches: each batch is a row slice of the
DiskArray taken inside the jitted step with a traced start index, so the step
compiles once. At the end the fit is checked against the closed-form least
squares solution on a subset that fits in memory.

    python examples/train_regression.py --rows 1000000 --features 64 --budget 32MB
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
from tqdm import tqdm

import jask


def write_dataset(folder: str, rows: int, features: int, chunk_rows: int, seed: int = 0):
    """Writes X (rows, features) and y (rows,) = X w + noise in chunks; returns the paths and w."""
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=features).astype(np.float32)
    x_path, y_path = os.path.join(folder, "x.npy"), os.path.join(folder, "y.npy")
    x_file = np.lib.format.open_memmap(x_path, mode="w+", dtype=np.float32, shape=(rows, features))
    y_file = np.lib.format.open_memmap(y_path, mode="w+", dtype=np.float32, shape=(rows,))
    for start in range(0, rows, chunk_rows):
        stop = min(rows, start + chunk_rows)
        x = rng.normal(size=(stop - start, features)).astype(np.float32)
        x_file[start:stop] = x
        y_file[start:stop] = x @ w_true + 0.1 * rng.normal(size=stop - start).astype(np.float32)
    x_file.flush()
    y_file.flush()
    del x_file, y_file
    return x_path, y_path, w_true


def batch_loss(params, x_batch, y_batch):
    prediction = x_batch @ params["w"] + params["b"]
    return jnp.mean(jnp.square(prediction - y_batch))


def make_step(optimizer, batch_size: int):
    @jax.jit
    def step(params, opt_state, x, y, start):
        # Row slices of DiskArrays with a traced start: one compiled step for every batch.
        x_batch = jax.lax.dynamic_slice_in_dim(x, start, batch_size)
        y_batch = jax.lax.dynamic_slice_in_dim(y, start, batch_size)
        loss, grads = jax.value_and_grad(batch_loss)(params, x_batch, y_batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def dataset_loss(params, x, y, chunk_rows: int) -> float:
    """Mean squared error over the whole data set, in eager row slices x[i:j]."""
    total = 0.0
    for start in range(0, x.shape[0], chunk_rows):
        stop = min(x.shape[0], start + chunk_rows)
        total += float(batch_loss(params, x[start:stop], y[start:stop])) * (stop - start)
    return total / x.shape[0]


def closed_form_check(params, x, y, subset_rows: int):
    """Least squares on the first rows (in memory) vs. the trained model on the same rows."""
    xs, ys = np.asarray(x[:subset_rows]), np.asarray(y[:subset_rows])
    design = np.hstack([xs, np.ones((subset_rows, 1), np.float32)])
    solution, *_ = np.linalg.lstsq(design.astype(np.float64), ys.astype(np.float64), rcond=None)
    best = float(np.mean((design @ solution - ys) ** 2))
    trained = float(batch_loss(params, xs, ys))
    return trained, best, solution


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--budget", default="32MB")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=0.05,
        help="peak learning rate of a cosine decay over the whole run",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder for the (temporary) data set files; default: the current one",
    )
    args = parser.parse_args(argv)

    jask.set_memory_budget(args.budget)
    with tempfile.TemporaryDirectory(prefix="jask-regression-", dir=args.data_dir or ".") as folder:
        return train(args, folder)


def train(args, folder: str) -> int:
    started = time.perf_counter()
    x_path, y_path, w_true = write_dataset(folder, args.rows, args.features, chunk_rows=65536)
    x, y = jask.DiskArray.open(x_path), jask.DiskArray.open(y_path)
    print(
        f"data: {x.nbytes + y.nbytes:,} bytes on disk ({x_path}), budget {jask.memory_budget():,} "
        f"bytes; written in {time.perf_counter() - started:.1f} s"
    )

    params = {"w": jnp.zeros(args.features, jnp.float32), "b": jnp.zeros((), jnp.float32)}
    steps_per_epoch = args.rows // args.batch_size
    schedule = optax.cosine_decay_schedule(args.learning_rate, args.epochs * steps_per_epoch)
    optimizer = optax.adam(schedule)
    opt_state = optimizer.init(params)
    step = make_step(optimizer, args.batch_size)
    rng = np.random.default_rng(1)
    for epoch in range(args.epochs):
        starts = rng.permutation(steps_per_epoch) * args.batch_size
        for start in tqdm(starts, desc=f"epoch {epoch}", unit="batch", leave=False):
            params, opt_state, _ = step(params, opt_state, x, y, jnp.int32(start))
        print(f"epoch {epoch}: loss = {dataset_loss(params, x, y, 262144):.6f}")

    trained, best, solution = closed_form_check(params, x, y, min(args.rows, 20_000))
    weight_error = float(np.max(np.abs(np.asarray(params["w"]) - solution[:-1])))
    print(
        f"on the first {min(args.rows, 20_000)} rows: trained MSE {trained:.6f}, closed-form "
        f"MSE {best:.6f}; largest weight difference {weight_error:.4f}"
    )
    ok = trained <= best * 1.05 + 1e-6
    print(
        "the trained model matches the closed-form solution" if ok else "the fit did NOT converge"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
