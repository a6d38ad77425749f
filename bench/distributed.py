"""W6 data-parallel: the training steps of W6 (bench/training.py) on 1, 2 and 4 processes of one
jax.distributed run (python -m jask.launch), each streaming its own rows of the dataset.

    python -m bench.distributed [--size-gib 0.5] [--steps 48] [--processes 1,2,4] [--repeat 1]
                                [--budget 256MB] [--data build/bench-data/distributed]
                                [--net-gbps 10] [--net-latency-us 50]

Every process opens its contiguous rows of W6's features and targets in place
(`jask.distributed.open_shard` on the shared files), and each step gathers its 1024 / N rows
of the global batch of 1024 at random from its own rows (`jask.take` inside the jitted step),
computes its part of the mean-squared-error loss and its gradients, sums them across the
processes (`jask.distributed.allreduce`, gloo) and applies the same adam update. Per process
the table shows the timed steps' wall time, the bytes it read (`jask.stats()`), the seconds
in its local step (gather + forward + backward), in the collective (which includes waiting
for the slowest process) and in the update, and the time of one all-reduce of the gradients
measured apart, all processes in step (the communication itself). The files are evicted from
the page cache before each run. With --repeat R the process counts take turns R times and the
table shows, for each, the run of median wall time (on a shared machine load comes and goes).

On one machine the processes share its cores and its disk, so the table cannot show
compute scaling. The projection assumes one process per host, each with its own disk and
cores: a step costs the local step of the 1-process run divided by N (each host gathers and
computes 1/N of the rows: its bytes read are 1/N of the 1-process run's, which the table
checks) plus the update, plus a ring all-reduce of the gradients over the network,
2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency at --net-gbps and --net-latency-us,
plus --dispatch-ms per all-reduce call for what `allreduce` does around the collective (placing
the leaves, assembling the global array, splitting the result).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from .harness import evict
from .training import LR, SEED, W6_BATCH, W6_STEPS, W6_TARGETS, mlp_init, training_arrays
from .workloads import GIB, generate

SYNCED_ALLREDUCES = 20  # all-reduces timed apart, after the steps


def worker(args: argparse.Namespace) -> None:
    """One process of the run: the timed steps, then the synced all-reduces; writes its JSON."""
    import jax
    import jax.numpy as jnp
    import optax

    import jask
    import jask.distributed as jd

    jd.initialize()
    jask.set_progress(False)
    jask.set_memory_budget(args.budget)
    n, rank = jd.num_processes(), jd.process_id()
    x = jd.open_shard(args.features)
    t = jd.open_shard(args.targets)
    local_batch = W6_BATCH // n
    rng = np.random.default_rng([SEED, 6, rank])
    order = rng.permutation(x.local.shape[0])[: args.steps * local_batch]
    batches = jnp.asarray(np.sort(order.reshape(args.steps, local_batch), axis=1).astype(np.int32))
    scale = 1.0 / (local_batch * n * W6_TARGETS)  # this process's part of the global mean

    def local_loss(params, features, targets, idx):
        (w1, b1), (w2, b2) = params
        xb, tb = jask.take(features, idx, axis=0), jask.take(targets, idx, axis=0)
        h = jax.nn.relu(xb @ w1 + b1)
        return jnp.sum(jnp.square(h @ w2 + b2 - tb)) * scale

    value_and_grad = jax.jit(jax.value_and_grad(local_loss))
    opt = optax.adam(LR)

    @jax.jit
    def update(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params = mlp_init()
    state = opt.init(params)
    # two steps untimed compile the step, the collective and the update (the second sees
    # the arrays the first one made, placed on this process's device)
    warm = params, state
    for i in range(2):
        loss, grads = value_and_grad(*warm[:1], x.local, t.local, batches[i])
        warm = update(*warm, jd.allreduce((loss, grads))[1])
    jax.block_until_ready(warm)

    times = {"local_s": 0.0, "collective_s": 0.0, "update_s": 0.0}
    losses = []
    jask.reset_stats()
    started = time.perf_counter()
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss, grads = jax.block_until_ready(value_and_grad(params, x.local, t.local, batches[i]))
        t1 = time.perf_counter()
        loss, grads = jax.block_until_ready(jd.allreduce((loss, grads), "sum"))
        t2 = time.perf_counter()
        params, state = jax.block_until_ready(update(params, state, grads))
        t3 = time.perf_counter()
        times["local_s"] += t1 - t0
        times["collective_s"] += t2 - t1
        times["update_s"] += t3 - t2
        losses.append(float(loss))
    wall = time.perf_counter() - started
    bytes_read = jask.stats().total.bytes_read

    jd.allreduce(np.zeros(1, np.float32))  # in step: the synced all-reduces start together
    t0 = time.perf_counter()
    for _ in range(SYNCED_ALLREDUCES):
        jax.block_until_ready(jd.allreduce(grads, "sum"))
    synced = (time.perf_counter() - t0) / SYNCED_ALLREDUCES
    record = {
        "rank": rank,
        "processes": n,
        "rows": [x.start, x.stop],
        "steps": args.steps,
        "wall_s": wall,
        "bytes_read": bytes_read,
        "allreduce_s": synced,
        "gradient_bytes": sum(g.nbytes for g in jax.tree.leaves(grads)),
        "mean_loss": float(np.mean(losses)),
        **times,
    }
    with open(os.path.join(args.results, f"rank-{rank}.json"), "w") as f:
        json.dump(record, f)


def run_processes(n: int, args: argparse.Namespace, paths: dict[str, str]) -> list[dict]:
    evict(paths.values())
    with tempfile.TemporaryDirectory(dir=args.data) as results:
        command = [sys.executable, "-m", "jask.launch", "-n", str(n), "-m", "bench.distributed"]
        command += ["--worker", "--features", paths["f6"], "--targets", paths["t6"]]
        command += ["--steps", str(args.steps), "--budget", str(args.budget)]
        command += ["--results", results]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        return [json.load(open(os.path.join(results, f"rank-{r}.json"))) for r in range(n)]


def table(runs: dict[int, list[dict]]) -> list[str]:
    lines = [
        "| processes | steps/s | wall s | MiB read per process | local step ms | collective ms "
        "| update ms | all-reduce ms (synced) | mean loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, records in runs.items():
        steps = records[0]["steps"]
        wall = max(r["wall_s"] for r in records)

        def per_step(key, records=records, steps=steps):
            values = [1e3 * r[key] / steps for r in records]
            return f"{np.mean(values):.1f} ({min(values):.1f}-{max(values):.1f})"

        mib = [r["bytes_read"] / 2**20 for r in records]
        synced = np.mean([1e3 * r["allreduce_s"] for r in records])
        lines.append(
            f"| {n} | {steps / wall:.2f} | {wall:.2f} | {np.mean(mib):.1f} | "
            f"{per_step('local_s')} | {per_step('collective_s')} | {per_step('update_s')} | "
            f"{synced:.2f} | {records[0]['mean_loss']:.4f} |"
        )
    return lines


def projection(
    runs: dict[int, list[dict]], rows: int, gbps: float, latency_us: float, dispatch_ms: float
) -> list[str]:
    """Epoch time on N hosts from the 1-process run's local step and a ring all-reduce."""
    base = runs[min(runs)][0]
    if base["processes"] != 1:
        return ["(the projection needs the 1-process run)"]
    local = base["local_s"] / base["steps"]
    update = base["update_s"] / base["steps"]
    grad_bytes = base["gradient_bytes"]
    steps_per_epoch = rows // W6_BATCH
    lines = [
        f"Projection, one process per host ({gbps:g} Gbit/s, {latency_us:g} us between hosts, "
        f"{dispatch_ms:g} ms of allreduce's own work per call; "
        f"local step {1e3 * local:.1f} ms and update {1e3 * update:.1f} ms from the 1-process "
        f"run; gradients {grad_bytes / 1e3:.0f} kB; epoch = {steps_per_epoch} steps):",
        "",
        "| hosts | local step ms | all-reduce ms | step ms | epoch s | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    one = None
    for n in (1, 2, 4, 8, 16, 32):
        comm = 0.0
        if n > 1:
            ring = 2 * (n - 1) / n * grad_bytes / (gbps * 1e9 / 8) + 2 * (n - 1) * latency_us * 1e-6
            comm = ring + dispatch_ms * 1e-3
        step = local / n + update + comm
        one = one or step
        lines.append(
            f"| {n} | {1e3 * local / n:.1f} | {1e3 * comm:.2f} | {1e3 * step:.1f} | "
            f"{steps_per_epoch * step:.1f} | {one / step:.2f} |"
        )
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.distributed", description=__doc__.split("\n")[0]
    )
    p.add_argument("--size-gib", type=float, default=0.5, help="W6's input size (dataset: 2x)")
    p.add_argument("--steps", type=int, default=W6_STEPS, help="timed steps per run")
    p.add_argument("--processes", default="1,2,4", help="process counts, comma-separated")
    p.add_argument("--repeat", type=int, default=1, help="rounds; the median run is shown")
    p.add_argument("--budget", default="256MB", help="each process's memory budget")
    p.add_argument("--data", default="build/bench-data/distributed", help="folder on disk")
    p.add_argument("--net-gbps", type=float, default=10.0, help="the projection's network")
    p.add_argument("--net-latency-us", type=float, default=50.0, help="the projection's latency")
    p.add_argument(
        "--dispatch-ms",
        type=float,
        default=4.0,
        help="the projection's cost of an allreduce call besides the transfer (measured here: "
        "5.3 ms per call at 2 processes, the gloo collective alone 1.5 ms)",
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--features", help=argparse.SUPPRESS)
    p.add_argument("--targets", help=argparse.SUPPRESS)
    p.add_argument("--results", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    os.makedirs(args.data, exist_ok=True)
    plan = {a.name: a for a in training_arrays(int(args.size_gib * GIB)) if a.name in ("f6", "t6")}
    generate(plan, ["f6", "t6"], args.data)
    paths = {name: os.path.join(args.data, a.filename) for name, a in plan.items()}
    rows = plan["f6"].shape[0]
    counts = [int(v) for v in args.processes.split(",")]
    rounds: dict[int, list[list[dict]]] = {n: [] for n in counts}
    for r in range(args.repeat):
        for n in counts:
            print(f"W6 on {n} process(es), round {r + 1}: {args.steps} steps ...", flush=True)
            rounds[n].append(run_processes(n, args, paths))
    runs = {}
    for n, results in rounds.items():
        results.sort(key=lambda records: max(rec["wall_s"] for rec in records))
        runs[n] = results[len(results) // 2]
        walls = ", ".join(f"{max(rec['wall_s'] for rec in res):.2f}" for res in results)
        print(f"  {n} process(es): wall s of the rounds {walls}")
    print()
    print(f"W6, {rows} rows ({sum(a.nbytes for a in plan.values()) / GIB:.2f} GiB), "
          f"budget {args.budget} per process, {os.cpu_count()} cores:")  # fmt: skip
    print("\n".join(table(runs)))
    print()
    print("\n".join(projection(runs, rows, args.net_gbps, args.net_latency_us, args.dispatch_ms)))


if __name__ == "__main__":
    main()
