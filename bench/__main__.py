"""Benchmarks Jask against chunked NumPy, Dask and in-memory JAX on the same files and budget.

    python -m bench                       # 2 GiB inputs, 256 MiB budget, uncapped and under a 1 GiB cap (20 minutes)
    python -m bench --cap 1GiB            # only under the cap (each contender in its own memory cgroup)
    python -m bench --quick               # 256 MiB inputs, 32 MiB budget, uncapped (under 2 minutes)
    python -m bench --scale 0.5,1,2,4,8   # W1-W3 at each size: bench/scaling.json and bench/scaling.png
    python -m bench --workloads W1,W3 --size-gib 4 --budget 512MB
    python -m bench --workloads W1s,W1z   # W1 over a safetensors file and a zstd Zarr group
    python -m bench --fio                 # also measure the disk with fio, as a reference for the probe

Writes the records to --out (default bench/results.json, with results.meta.json beside it) and
BENCHMARKS.md, and prints the table.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import time

from . import disk, formats, harness, machine, report, targets
from .cgroup import CgroupUnavailable, create_memory_cgroup
from .formats import FORMAT_WORKLOADS
from .workloads import CONTENDERS, GIB, IN_MEMORY, MIB, WORKLOADS, arrays, generate

DEFAULT_CAP = GIB
DEFAULT_MINUTES = 20  # the default run's whole time, probes and reports included
TIMELINE_WORKLOAD = "W5"  # the Jask run whose I/O timeline the default run records
# Time budgeting (--minutes): every run may take what is left except these reserves, so no workload
# after it goes without time; a run the budget cannot hold any more is recorded as not run.
RESERVE_SECONDS = 45  # the final disk probe and the reports
MIN_RUN_SECONDS = 20  # the least any one contender run is given
MIN_WORKLOAD_SECONDS = 60  # the least kept for each workload still to come

UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes in "256MB", "32MiB", "1GB" (binary units, as jask.set_memory_budget) or a plain number."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:I?B)?\s*", text.upper())
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size like 256MB or 1GB, got {text!r}")
    return int(float(match.group(1)) * UNITS[match.group(2)])


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="256 MiB inputs and a 32 MiB budget")
    p.add_argument(
        "--size-gib",
        type=float,
        help="bytes of each large input, in GiB (default 2; 0.25 with --quick)",
    )
    p.add_argument(
        "--budget", type=parse_size, help="memory budget (default 256MB; 32MB with --quick)"
    )
    p.add_argument(
        "--workloads",
        help=f"comma-separated, from {','.join(WORKLOADS)} (default all; W1,W2,W3 with --scale)",
    )
    p.add_argument(
        "--contenders", default=",".join(CONTENDERS), help="comma-separated (default all)"
    )
    p.add_argument(
        "--scale", help="input sizes in GiB for a sweep at a fixed budget, e.g. 0.5,1,2,4,8"
    )
    p.add_argument(
        "--data",
        default="build/bench-data",
        help="folder for the data files, reused across runs (not tmpfs)",
    )
    p.add_argument(
        "--out", help="records JSON (default bench/results.json; bench/scaling.json with --scale)"
    )
    p.add_argument("--markdown", default="BENCHMARKS.md", help="the report to write")
    p.add_argument("--timeout", type=float, default=900, help="seconds one contender may run")
    p.add_argument(
        "--repeat",
        type=int,
        help="rounds of the out-of-core contenders per regime, each round in the reverse "
        "order of the last; the table shows each one's median time (default 1)",
    )
    p.add_argument(
        "--cap",
        help="memory caps to run every contender under, comma-separated, 'none' for uncapped: each "
        "contender's process in its own cgroup, page cache counted (default none,1GiB; none with "
        "--quick, --scale or --workloads)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        help=f"time budget of the whole run; contenders that would overrun it are timed out or "
        f"not run, and recorded so (default {DEFAULT_MINUTES} for the default run, else none)",
    )
    p.add_argument(
        "--fio", action="store_true", help="also measure the disk with fio (iodepth 16-32)"
    )
    p.add_argument(
        "--timeline",
        help=f"record Jask's I/O timeline on this workload (bench/timeline.json, .png; default "
        f"{TIMELINE_WORKLOAD} in the default run, 'none' for none)",
    )
    args = p.parse_args(argv)
    default_run = not (args.quick or args.scale or args.workloads or args.size_gib or args.cap)
    caps = args.cap or ("none" if args.quick or args.scale else "none," + str(DEFAULT_CAP))
    try:
        args.caps = [
            None if c.strip().lower() == "none" else parse_size(c) for c in caps.split(",")
        ]
    except argparse.ArgumentTypeError as e:
        p.error(f"--cap: {e}")
    args.minutes = args.minutes or (DEFAULT_MINUTES if default_run else None)
    timeline = args.timeline or (TIMELINE_WORKLOAD if default_run else "none")
    args.timeline = None if timeline.lower() == "none" else timeline
    args.budget = args.budget or (32 * MIB if args.quick else 256 * MIB)
    size = args.size_gib or (0.25 if args.quick else 2.0)
    args.sizes = (
        [int(float(s) * GIB) for s in args.scale.split(",")] if args.scale else [int(size * GIB)]
    )
    # the format workloads (W1s, W1z) test file formats, not the regimes: run them by name
    default_workloads = [w for w in WORKLOADS if w not in FORMAT_WORKLOADS]
    args.workloads = (
        args.workloads or ("W1,W2,W3" if args.scale else ",".join(default_workloads))
    ).split(",")
    args.contenders = args.contenders.split(",")
    args.repeat = args.repeat or 1
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    for name in args.workloads:
        if name not in WORKLOADS:
            p.error(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    for name in args.contenders:
        if name not in CONTENDERS:
            p.error(f"unknown contender {name!r}; choose from {', '.join(CONTENDERS)}")
    if args.timeline and args.timeline not in WORKLOADS:
        p.error(
            f"--timeline: unknown workload {args.timeline!r}; choose from {', '.join(WORKLOADS)}"
        )
    args.out = args.out or ("bench/scaling.json" if args.scale else "bench/results.json")
    return args


def check_cgroups(args: argparse.Namespace) -> str | None:
    """Makes sure a memory cgroup can be made for the capped runs: exits naming why not when --cap
    asked for one; in the default run drops the capped pass and returns why."""
    if not any(args.caps):
        return None
    try:
        create_memory_cgroup(max(c for c in args.caps if c), "jask-bench").remove()
        return None
    except (CgroupUnavailable, OSError) as e:
        if args.cap:
            sys.exit(f"--cap {args.cap}: cannot cap the contenders' memory: {e}")
        args.caps = [c for c in args.caps if not c]
        print(
            f"WARNING: running uncapped only; cannot make a memory cgroup for the capped pass: {e}"
        )
        return str(e)


class Clock:
    """The --minutes budget: how long the next contender run may take (see RESERVE_SECONDS)."""

    def __init__(self, started: float, minutes: float | None, fallback: float):
        self.deadline = started + 60 * minutes if minutes else None
        self.fallback = fallback  # --timeout

    def timeout(self, runs_after: int, workloads_after: int) -> float | None:
        """Seconds for one run with `runs_after` runs left in this workload and `workloads_after`
        workloads to come, or None when the budget is spent."""
        if self.deadline is None:
            return self.fallback
        left = (
            self.deadline
            - time.time()
            - RESERVE_SECONDS
            - MIN_RUN_SECONDS * runs_after
            - MIN_WORKLOAD_SECONDS * workloads_after
        )
        if self.deadline - time.time() - RESERVE_SECONDS < MIN_RUN_SECONDS:
            return None
        return min(self.fallback, max(MIN_RUN_SECONDS, left))


def prepare_data_dir(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    fs = machine.filesystem(path)
    if fs["type"] in machine.RAM_FILESYSTEMS:
        sys.exit(f"--data {path} is on {fs['type']} (RAM): the benchmark needs a folder on disk")


def measure_limits(data_dir: str, sizes: list[int], fio: bool = False) -> dict:
    """The disk's limits (bench/disk.py) and NumPy's in-memory matmul rate; `final_limits` measures
    the disk again. With `fio`, fio's measurement of the same as a reference (limits["fio"])."""
    probe = min(GIB, max(16 * MIB, min(sizes)))
    side = 4096 if max(sizes) >= GIB else 2048 if max(sizes) >= 64 * MIB else 1024
    print(
        f"Measuring the disk ({probe / MIB:g} MiB file: {disk.describe()}) and in-memory matmul ..."
    )
    measured = disk.bandwidth(data_dir, probe)
    limits = {f"{k}_before": v for k, v in measured.items()}
    limits.update(
        probe_bytes=probe,
        probe_text=disk.describe(),
        numpy_matmul_flops=machine.matmul_flops(side),
        matmul_side=side,
    )
    print(f"  {_disk_text(measured)}; matmul {limits['numpy_matmul_flops'] / 1e9:.1f} GFLOP/s")
    if fio:
        limits["fio"] = disk.fio(data_dir, probe)
        print("  fio: " + (limits["fio"].get("error") or _disk_text(limits["fio"])))
    return limits


def _disk_text(m: dict) -> str:
    text = f"read {m['read_bps'] / 1e9:.2f} GB/s"
    if "read_direct_bps" in m:
        text += f" (direct {m['read_direct_bps'] / 1e9:.2f}, buffered {m['read_buffered_bps'] / 1e9:.2f})"
    return (
        text
        + f", write {m['write_bps'] / 1e9:.2f} GB/s, random 4 KiB {m['random_read_iops'] / 1e3:.1f}k IOPS, "
        f"random 64 KiB {m['random_read_bps'] / 1e9:.2f} GB/s"
    )


LIMIT_KEYS = (
    "read_bps",
    "read_direct_bps",
    "read_buffered_bps",
    "write_bps",
    "random_read_iops",
    "random_read_bps",
)


def final_limits(data_dir: str, limits: dict, records: list[dict]) -> None:
    """The best of the disk measured before and after the workloads (other load on the machine only
    slows it down), and the best in-memory matmul rate: NumPy's, or an in-memory W3 contender's."""
    after = disk.bandwidth(data_dir, limits["probe_bytes"], passes=1)
    print(f"Disk after the workloads: {_disk_text(after)}")
    limits["probe_seconds_after"] = after["probe_seconds"]
    probes = limits.get("workload_probes", [])
    for key in LIMIT_KEYS:
        limits[f"{key}_after"] = after[key]
        limits[key] = max(after[key], limits[f"{key}_before"], *(p[key] for p in probes))
    in_memory = [
        r["flops"] / r["seconds"]
        for r in records
        if r["workload"] == "W3" and r["contender"] in IN_MEMORY and r["seconds"]
    ]
    limits["matmul_flops"] = max([limits["numpy_matmul_flops"], *in_memory])


def adjacent_limits(limits: dict, workload: str, size: int, cap: int | None) -> dict:
    """`limits` with the disk's rates and the matmul rate taken from the probes just before and
    just after the workload's pass under `cap` (the better of the two; after the last pass, the
    final disk probe, and the last matmul probe alone)."""
    probes = limits.get("workload_probes") or []
    key = (workload, size, cap)
    index = next(
        (
            i
            for i, p in enumerate(probes)
            if (p["workload"], p["size_bytes"], p.get("cap_bytes")) == key
        ),
        None,
    )
    if index is None:
        return limits
    near = dict(limits)
    for key in LIMIT_KEYS:
        following = probes[index + 1][key] if index + 1 < len(probes) else limits[f"{key}_after"]
        near[key] = max(probes[index][key], following)
    matmul = [p["matmul_flops"] for p in probes[index : index + 2] if "matmul_flops" in p]
    if matmul:
        near["matmul_flops"] = max(matmul)
    return near


def score_record(r: dict, limits: dict) -> None:
    """Scores `r` against the disk of its own pass's minutes (limit_fraction, the table's) and against
    the best rates of the whole run (limit_fraction_run)."""
    harness.score(r, limits)
    run_fraction = r.get("limit_fraction")
    harness.score(r, adjacent_limits(limits, r["workload"], r["size_bytes"], r.get("cap_bytes")))
    r["limit_fraction_run"] = run_fraction


def _outcome(r: dict) -> str:
    if r["seconds"] is None:
        return r["error"] or r["note"]
    text = f"{r['seconds']:8.2f} s"
    if r["cap_bytes"]:
        peak = r["cgroup_peak_bytes"]
        text += f"  cgroup peak {peak / MIB:.0f} MiB" if peak is not None else ""
    return text


def pass_order(order: list[str], pass_index: int, workload_index: int) -> list[str]:
    """The contenders of a workload's pass `pass_index` in the order they run: each pass in the
    reverse order of the one before, and each workload's first pass in the reverse order of the
    last workload's first pass. The run after a workload's probe (and after the last workload's
    writes) so falls on each end of the list in turn: the disk's slow seconds there (random reads
    at 8.5k IOPS against 58k, seen after probes) fell on the first contender of every workload."""
    return order[::-1] if (pass_index + workload_index) % 2 else list(order)


def run_workloads(args: argparse.Namespace, clock: Clock) -> tuple[list[dict], dict | None]:
    """Every selected contender on every selected workload, at each size, on the same files: per
    workload an uncapped pass and a pass under each cap, each in the reverse contender order of
    the one before (`pass_order`), so the disk's drift falls on every contender alike. Also the timeline run."""
    records, timeline = [], None
    steps = [(size, name) for size in args.sizes for name in args.workloads]
    for index, (size, name) in enumerate(steps):
        if index == 0 or size != steps[index - 1][0]:
            print(f"\nInputs of {size / GIB:g} GiB, budget {args.budget / MIB:g} MiB")
            for cap in args.caps:  # a cap's plan may add inputs of its own (W3's)
                plan = arrays(size, args.budget, cap)
                names = {n for w in args.workloads for n in WORKLOADS[w].input_names(plan)}
                generate(plan, sorted(names), args.data)
            plan = arrays(size, args.budget)
        derived = WORKLOADS[name].derived
        facts = {}
        if derived:
            formats.generate(derived, args.data, size, args.budget)
            facts = derived.facts(args.data, plan, args.budget)
            if "decode_bps" in facts:
                print(
                    f"  {name}: stored {facts['stored_ratio']:.2f}x smaller; one core decodes "
                    f"{facts['decode_bps'] / 1e9:.2f} GB/s of its chunks (numcodecs.Zstd)"
                )
        contenders = [c for c in args.contenders if c in WORKLOADS[name].contenders]
        # in-memory contenders do no I/O, so disk noise does not touch them: one round per pass
        rounds = [
            (cap, [c for c in contenders if round_ == 0 or c not in IN_MEMORY])
            for cap in args.caps
            for round_ in range(args.repeat)
        ]
        with_timeline = name == args.timeline and "jask" in contenders
        runs_left = sum(len(order) for _, order in rounds) + with_timeline
        runs: dict[tuple, list[dict]] = {}
        fastest = None
        for k, (cap, order) in enumerate(rounds):
            if k == 0 or cap != rounds[k - 1][0]:
                probe_pass(args, name, size, cap)
            for contender in pass_order(order, k, index):
                runs_left -= 1
                seconds = clock.timeout(runs_left, len(steps) - index - 1)
                timed = None
                if seconds and fastest and args.minutes:
                    timed = max(harness.PEER_MIN_SECONDS, harness.PEER_FACTOR * fastest)
                spent = "" if seconds else f"not run: the {args.minutes:g}-minute budget is spent"
                r = harness.measure(
                    name,
                    contender,
                    size,
                    args.budget,
                    args.data,
                    seconds or 0,
                    cap,
                    not_run=spent,
                    timed_timeout=timed,
                )
                runs.setdefault((cap, contender), []).append(r)
                if r["seconds"] is not None and contender not in IN_MEMORY:
                    fastest = min(fastest or r["seconds"], r["seconds"])
                print(
                    f"  {name} {harness.regime_text(cap):13} {CONTENDERS[contender]:24} {_outcome(r)}"
                )
        if with_timeline:
            timeline = record_timeline(args, name, size, clock.timeout(0, len(steps) - index - 1))
        for cap in args.caps:
            group = [dict(harness.median_record(runs[(cap, c)]), **facts) for c in contenders]
            report.compare(group)
            records += group
            for r in group[:1]:
                if harness.small_data(r):
                    print(
                        f"  NOTE {name}: its data ({r['data_bytes'] / GIB:.2f} GiB) is "
                        f"{r['data_bytes'] / cap:.1f}x the {harness.size_text(cap)} cap, under "
                        f"{harness.CAP_RATIO}x: flagged in the table"
                    )
    return records, timeline


def probe_pass(args: argparse.Namespace, workload: str, size: int, cap: int | None) -> None:
    """The disk and the CPU of the minutes of a workload's pass under `cap` (None: uncapped),
    probed before it (see disk.WORKLOAD_PROBE_BYTES; NumPy's square matmul, best of 2): the pass's
    records are scored against this probe and the next one (`adjacent_limits`). The host's CPU
    drifts as much as its disk (NumPy's matmul probe read 154-340 GFLOP/s in runs an hour apart),
    so a compute-heavy pass is bound by the flops of its own minutes, not the run's best."""
    probe = disk.bandwidth(args.data, disk.WORKLOAD_PROBE_BYTES, passes=1)
    probe.update(
        workload=workload,
        size_bytes=size,
        cap_bytes=cap,
        matmul_flops=machine.matmul_flops(args.matmul_side, repeat=2),
    )
    args.probes.append(probe)
    print(
        f"  {workload} {harness.regime_text(cap):13} now: {_disk_text(probe)}; "
        f"matmul {probe['matmul_flops'] / 1e9:.0f} GFLOP/s"
    )


def record_timeline(args, name: str, size: int, timeout: float | None) -> dict:
    """One more uncapped Jask run of workload `name`, recording its I/O timeline (not in the table)."""
    path = os.path.join(os.path.dirname(os.path.abspath(args.out)), "timeline.json")
    if timeout is None:
        return {"workload": name, "error": f"not run: the {args.minutes:g}-minute budget is spent"}
    r = harness.measure(name, "jask", size, args.budget, args.data, timeout, timeline=path)
    print(f"  {name} timeline      {CONTENDERS['jask']:24} {_outcome(r)}")
    return {
        "workload": name,
        "size_bytes": size,
        "seconds": r["seconds"],
        "path": path if r["seconds"] is not None else None,
        "error": r["error"],
    }


def write_reports(args: argparse.Namespace, records: list[dict], meta: dict) -> None:
    """The records and their meta, the plots, then BENCHMARKS.md from the latest default run and
    the latest sweep."""
    report.save(args.out, records, meta)
    folder = os.path.dirname(os.path.abspath(args.out))
    main_run = report.load(os.path.join(folder, "results.json")) if args.scale else (records, meta)
    sweep = (records, meta) if args.scale else report.load(os.path.join(folder, "scaling.json"))
    plots = {"scaling": os.path.join(folder, "scaling.png")} if sweep else {}
    written = [args.out, report.meta_path(args.out)]
    if args.scale:
        report.plot(records, plots["scaling"])
        written.append(plots["scaling"])
    else:
        if any(r["cap_bytes"] for r in records):
            plots["capped"] = os.path.join(folder, "capped.png")
            report.plot_capped(records, plots["capped"])
            written.append(plots["capped"])
        timeline = meta.get("timeline") or {}
        if timeline.get("path"):
            plots["timeline"] = os.path.join(folder, "timeline.png")
            report.plot_timeline(
                report.load_timeline(timeline["path"]), plots["timeline"], timeline
            )
            written.append(plots["timeline"])
    report.write_markdown(args.markdown, main_run, sweep, plots)
    written.append(args.markdown)
    print(f"\nWrote {', '.join(written)} in {meta['seconds'] / 60:.1f} minutes.")


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.time()
    prepare_data_dir(args.data)
    meta = {
        "command": shlex.join(["python", "-m", "bench", *(sys.argv[1:] if argv is None else argv)]),
        "machine": machine.describe(args.data),
        "budget_bytes": args.budget,
        "caps": None,
        "minutes": args.minutes,
    }
    meta["cap_unavailable"] = check_cgroups(args)
    meta["caps"] = args.caps
    m = meta["machine"]
    print(
        f"{m['cpu']}, {m['cores']} cores, {m['ram_bytes'] / GIB:.0f} GiB RAM; data in {m['data_dir']} "
        f"({m['filesystem']}); load average {m['load_average']:.1f}"
    )
    meta["limits"] = measure_limits(args.data, args.sizes, args.fio)
    print(
        "Each contender runs in a fresh process; its input files are evicted from the page cache "
        "(fsync + POSIX_FADV_DONTNEED) before the timed run; jit compilation is excluded; "
        "W5 times the third step of a training loop."
    )
    regimes = ", ".join(
        f"under a {harness.size_text(c)} cap" if c else "uncapped" for c in args.caps
    )
    print(
        f"Per workload: {regimes}, each pass in the reverse contender order of the one before "
        "(the first pass in the reverse order of the last workload's first)"
        + (f", {args.repeat} rounds per pass (median time)" if args.repeat > 1 else "")
        + (f"; the whole run within {args.minutes:g} minutes" if args.minutes else "")
        + "."
    )
    clock = Clock(started, args.minutes, args.timeout)
    args.probes = meta["limits"]["workload_probes"] = []
    args.matmul_side = meta["limits"]["matmul_side"]
    records, meta["timeline"] = run_workloads(args, clock)
    final_limits(args.data, meta["limits"], records)
    for r in records:
        score_record(r, meta["limits"])
    meta["seconds"] = time.time() - started
    meta["load_average_end"] = os.getloadavg()[0]
    print()
    print(report.text_table(records))
    verdicts = targets.judge(records)
    if verdicts:
        print("\nIssue 14's targets in this run:\n" + targets.markdown(verdicts))
    if report.decode_table(records):
        print("\n" + report.decode_table(records))
    write_reports(args, records, meta)


if __name__ == "__main__":
    main()
