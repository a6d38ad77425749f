"""One contender on one workload, in this process; prints one line of JSON (the harness starts this).

    python -m bench.run_one --workload W1 --contender jask --data build/bench-data \\
        --out-dir build/bench-data/out/W1-jask --size 268435456 --budget 33554432
"""

import argparse
import contextlib
import json
import os
import sys
import time

from .harness import SETUP_DONE, cached_fraction, evict, proc_io, proc_status
from .workloads import WORKLOADS, Context, arrays


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run_one")
    parser.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    parser.add_argument("--contender", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--size", type=int, required=True, help="bytes of each large input")
    parser.add_argument("--budget", type=int, required=True, help="memory budget in bytes")
    parser.add_argument("--cap", type=int, help="the memory cap it runs under, in bytes")
    parser.add_argument(
        "--timeline", help="write Jask's I/O timeline of the timed part here (JSON; Jask only)"
    )
    args = parser.parse_args()

    workload = WORKLOADS[args.workload]
    ctx = Context(args.data, args.out_dir, args.budget, arrays(args.size, args.budget, args.cap))
    # before the setup, which can take longer than the timed part (W5 takes two steps first)
    recorder = timeline_recorder() if args.timeline else contextlib.nullcontext()
    trial = workload.contenders[args.contender](ctx)
    derived = workload.derived.files(args.data, ctx.plan, args.budget) if workload.derived else []
    files = (
        [ctx.path(name) for name in workload.input_names(ctx.plan)]
        + derived
        + [p for p in trial.evict if os.path.exists(p)]
    )
    evict(files)
    cached = max(cached_fraction(path) for path in files)  # pages still mapped cannot be evicted

    print(SETUP_DONE, flush=True)  # the harness bounds the timed part from here
    baseline = proc_status("VmRSS")
    stages_before = jask_stage_seconds()
    before = proc_io()
    with recorder as recorded:
        start = time.perf_counter()
        result = trial.run()
        seconds = time.perf_counter() - start
    after = proc_io()
    peak = proc_status("VmHWM")  # before the check, which may allocate
    stages = jask_stage_seconds()
    if args.timeline:
        with open(args.timeline, "w") as f:
            json.dump(recorded.timeline, f)

    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_rss_bytes": peak,
                "baseline_rss_bytes": baseline,
                "read_bytes": after["read_bytes"] - before["read_bytes"],
                "written_bytes": after["write_bytes"] - before["write_bytes"],
                "cached_fraction": cached,
                "check": trial.check(result),
                # how Jask's reads went to the disk: "auto" means it had not yet timed 256 MiB of reads
                # of 8 MiB or more each way (until then reads go direct)
                "io_mode": sys.modules["jask"].io_mode() if "jask" in sys.modules else None,
                # seconds Jask's block pipelines spent reading, computing, writing, and in all (the profile)
                "jask_stage_seconds": {k: stages[k] - stages_before[k] for k in stages}
                if stages
                else None,
            }
        )
    )


def timeline_recorder():
    """`jask.stats(timeline=True)`: its `.timeline` is a list of {"stage", "op", "start", "end",
    "bytes"}, seconds from the context's start."""
    import jask

    if not hasattr(jask, "stats"):
        sys.exit(
            f"--timeline needs jask.stats(timeline=True), which this Jask ({jask.__file__}) "
            "does not have yet"
        )
    return jask.stats(timeline=True)


def jask_stage_seconds() -> dict | None:
    """Jask's pipeline stage times so far, if the contender uses Jask."""
    if "jask" not in sys.modules:
        return None
    from jask import _engine

    return _engine.pipeline_stage_seconds()


if __name__ == "__main__":
    main()
