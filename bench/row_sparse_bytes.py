"""What one adam step on an embedding table on disk reads and writes: dense (`jax.grad` with
respect to the DiskArray table, `optax.adam`, `optax.apply_updates`: the gradient is a dense
DiskArray and every table-shaped array is read and rewritten) against `jask.row_sparse` (only the
rows a batch touched, of the table and of m and v), jitted, measured on the third step of each.

A table of ROWS x 128 float32 and batches of BATCH random rows; the sparse step runs on a scratch
table and on a lasting .npy file (written in place through its journal). Bytes are the process's
read(2)/write(2) bytes (/proc/self/io rchar/wchar, which include O_DIRECT requests) and Jask's
I/O counters (every read and write the engine makes, both directions). /proc's read_bytes and
write_bytes are not used: on the development VM they counted 128 MiB for 1000 plain 512-byte
pwrites to a 128 MiB file.

    python -m bench.row_sparse_bytes [--rows 262144] [--batch 1024] [--budget 64MB]
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
from jask import _engine

D = 128
MIB = 2**20


def syscall_bytes() -> tuple[int, int]:
    fields = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


def measured(step, *args):
    """(seconds, read MiB, written MiB, engine MiB) of one call of `step` and its result's read."""
    (r0, w0), e0 = syscall_bytes(), sum(_engine.io_counters())
    t = time.perf_counter()
    table, _ = step(*args)
    np.asarray(table[0])  # the step has run (results are DiskArrays: nothing to block on)
    seconds = time.perf_counter() - t
    (r1, w1), e1 = syscall_bytes(), sum(_engine.io_counters())
    return seconds, (r1 - r0) / MIB, (w1 - w0) / MIB, (e1 - e0) / MIB


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=262144)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--budget", default="64MB")
    parser.add_argument("--folder", default="/var/tmp")
    args = parser.parse_args()
    jask.set_memory_budget(args.budget)
    rng = np.random.default_rng(0)
    start = rng.standard_normal((args.rows, D)).astype(np.float32)
    targets = jnp.asarray(rng.standard_normal((args.batch, D)).astype(np.float32))
    batches = [rng.integers(0, args.rows, args.batch).astype(np.int32) for _ in range(3)]

    def loss(rows):
        return jnp.sum(jnp.square(rows - targets))

    adam = optax.adam(1e-3)

    @jax.jit
    def dense_step(table, state, idx):
        grads = jax.grad(lambda t: loss(t[idx]))(table)
        updates, state = adam.update(grads, state, table)
        return optax.apply_updates(table, updates), state

    opt = jask.row_sparse(optax.adam(1e-3))

    @jax.jit
    def sparse_step(table, state, idx):
        return opt.update_(table, state, idx, jax.grad(loss)(table[idx]))

    folder = tempfile.mkdtemp(dir=args.folder)
    path = os.path.join(folder, "table.npy")
    np.save(path, start)
    cases = [
        ("dense adam", dense_step, jask.DiskArray.from_numpy(start), adam.init),
        ("row_sparse adam, scratch table", sparse_step, jask.DiskArray.from_numpy(start), opt.init),
        (
            "row_sparse adam, .npy table",
            sparse_step,
            jask.DiskArray.open(path, mode="r+"),
            opt.init,
        ),
    ]
    print(f"table {args.rows} x {D} float32 = {start.nbytes / MIB:.0f} MiB, batch {args.batch}")
    print("| step | s | read MiB | written MiB | engine I/O MiB |")
    print("|---|---|---|---|---|")
    for name, step, table, init in cases:
        state = init(table)
        for idx in batches[:2]:
            table, state = step(table, state, idx)
        seconds, read, written, engine = measured(step, table, state, batches[2])
        print(f"| {name} | {seconds:.2f} | {read:.1f} | {written:.1f} | {engine:.1f} |")
    os.unlink(path)
    os.rmdir(folder)


if __name__ == "__main__":
    main()
