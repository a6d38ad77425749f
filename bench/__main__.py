"""Benchmarks Jask against chunked NumPy, Dask and in-memory JAX on the same files and budget.

    python -m bench                       # inputs of 2 GiB each, 256 MiB budget, 2 rounds (under 20 minutes)
    python -m bench --quick               # 256 MiB inputs, 32 MiB budget (under 2 minutes)
    python -m bench --scale 0.5,1,2,4,8   # W1-W3 at each size: bench/scaling.json and bench/scaling.png
    python -m bench --workloads W1,W3 --size-gib 4 --budget 512MB
    python -m bench --workloads W1s,W1z   # W1 over a safetensors file and a zstd Zarr group

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

from . import disk, formats, harness, machine, report
from .workloads import CONTENDERS, GIB, IN_MEMORY, MIB, WORKLOADS, arrays, generate

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
        help="rounds of the out-of-core contenders, each round in the reverse "
        "order of the last; the table shows each one's median time (default 2; 1 with --quick or --scale)",
    )
    args = p.parse_args(argv)
    args.budget = args.budget or (32 * MIB if args.quick else 256 * MIB)
    size = args.size_gib or (0.25 if args.quick else 2.0)
    args.sizes = (
        [int(float(s) * GIB) for s in args.scale.split(",")] if args.scale else [int(size * GIB)]
    )
    args.workloads = (args.workloads or ("W1,W2,W3" if args.scale else ",".join(WORKLOADS))).split(
        ","
    )
    args.contenders = args.contenders.split(",")
    args.repeat = args.repeat or (1 if args.quick or args.scale else 2)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    for name in args.workloads:
        if name not in WORKLOADS:
            p.error(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    for name in args.contenders:
        if name not in CONTENDERS:
            p.error(f"unknown contender {name!r}; choose from {', '.join(CONTENDERS)}")
    args.out = args.out or ("bench/scaling.json" if args.scale else "bench/results.json")
    return args


def prepare_data_dir(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    fs = machine.filesystem(path)
    if fs["type"] in machine.RAM_FILESYSTEMS:
        sys.exit(f"--data {path} is on {fs['type']} (RAM): the benchmark needs a folder on disk")


def measure_limits(data_dir: str, sizes: list[int]) -> dict:
    """Disk bandwidth (direct I/O) and NumPy's in-memory matmul rate; `final_limits` measures the disk again."""
    probe = min(GIB, max(16 * MIB, min(sizes)))
    side = 4096 if max(sizes) >= GIB else 2048 if max(sizes) >= 64 * MIB else 1024
    print(
        f"Measuring the disk (direct I/O, 16 MiB requests, {probe / MIB:g} MiB file) and in-memory matmul ..."
    )
    read_bps, write_bps = disk.bandwidth(data_dir, probe)
    limits = {
        "read_bps_before": read_bps,
        "write_bps_before": write_bps,
        "probe_bytes": probe,
        "numpy_matmul_flops": machine.matmul_flops(side),
        "matmul_side": side,
    }
    print(
        f"  disk read {read_bps / 1e9:.2f} GB/s, write {write_bps / 1e9:.2f} GB/s; "
        f"matmul {limits['numpy_matmul_flops'] / 1e9:.1f} GFLOP/s"
    )
    return limits


def final_limits(data_dir: str, limits: dict, records: list[dict]) -> None:
    """The best of the disk measured before and after the workloads (other load on the machine only
    slows it down), and the best in-memory matmul rate: NumPy's, or an in-memory W3 contender's."""
    read_bps, write_bps = disk.bandwidth(data_dir, limits["probe_bytes"], passes=1)
    limits.update(
        read_bps_after=read_bps,
        write_bps_after=write_bps,
        read_bps=max(read_bps, limits["read_bps_before"]),
        write_bps=max(write_bps, limits["write_bps_before"]),
    )
    in_memory = [
        r["flops"] / r["seconds"]
        for r in records
        if r["workload"] == "W3" and r["contender"] in IN_MEMORY and r["seconds"]
    ]
    limits["matmul_flops"] = max([limits["numpy_matmul_flops"], *in_memory])


def run_workloads(args: argparse.Namespace) -> list[dict]:
    """Every selected contender on every selected workload, at each size, on the same files."""
    records = []
    for size in args.sizes:
        print(f"\nInputs of {size / GIB:g} GiB, budget {args.budget / MIB:g} MiB")
        plan = arrays(size, args.budget)
        generate(plan, sorted({n for w in args.workloads for n in WORKLOADS[w].inputs}), args.data)
        for name in args.workloads:
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
            runs: dict[str, list[dict]] = {c: [] for c in contenders}
            for round_ in range(args.repeat):
                # in-memory contenders do no I/O, so disk noise does not touch them: one round
                order = [c for c in contenders if round_ == 0 or c not in IN_MEMORY]
                for contender in order[::-1] if round_ % 2 else order:
                    r = harness.measure(name, contender, size, args.budget, args.data, args.timeout)
                    runs[contender].append(r)
                    outcome = (
                        f"{r['seconds']:8.2f} s"
                        if r["seconds"] is not None
                        else r["error"] or r["note"]
                    )
                    print(f"  {name} {CONTENDERS[contender]:24} {outcome}")
            group = [dict(harness.median_record(runs[c]), **facts) for c in contenders]
            report.compare(group)
            records += group
    return records


def write_reports(args: argparse.Namespace, records: list[dict], meta: dict) -> None:
    """The records and their meta, then BENCHMARKS.md from the latest default run and the latest sweep."""
    report.save(args.out, records, meta)
    folder = os.path.dirname(os.path.abspath(args.out))
    main_run = report.load(os.path.join(folder, "results.json")) if args.scale else (records, meta)
    sweep = (records, meta) if args.scale else report.load(os.path.join(folder, "scaling.json"))
    plot_file = os.path.join(folder, "scaling.png") if sweep else None
    if args.scale:
        report.plot(records, plot_file)
    report.write_markdown(args.markdown, main_run, sweep, plot_file)
    print(
        f"\nWrote {args.out}, {report.meta_path(args.out)} and {args.markdown}"
        + (f" and {plot_file}" if args.scale else "")
        + f" in {meta['seconds'] / 60:.1f} minutes."
    )


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.time()
    prepare_data_dir(args.data)
    meta = {
        "command": shlex.join(["python", "-m", "bench", *(sys.argv[1:] if argv is None else argv)]),
        "machine": machine.describe(args.data),
        "budget_bytes": args.budget,
    }
    m = meta["machine"]
    print(
        f"{m['cpu']}, {m['cores']} cores, {m['ram_bytes'] / GIB:.0f} GiB RAM; data in {m['data_dir']} "
        f"({m['filesystem']}); load average {m['load_average']:.1f}"
    )
    meta["limits"] = measure_limits(args.data, args.sizes)
    print(
        "Each contender runs in a fresh process; its input files are evicted from the page cache "
        "(fsync + POSIX_FADV_DONTNEED) before the timed run; jit compilation is excluded; "
        "W5 times the third step of a training loop."
    )
    if args.repeat > 1:
        print(
            f"{args.repeat} rounds of the out-of-core contenders, alternating their order; "
            "the table shows each one's median time."
        )
    records = run_workloads(args)
    final_limits(args.data, meta["limits"], records)
    for r in records:
        harness.score(r, meta["limits"])
    meta["seconds"] = time.time() - started
    meta["load_average_end"] = os.getloadavg()[0]
    print()
    print(report.text_table(records))
    if report.decode_table(records):
        print("\n" + report.decode_table(records))
    write_reports(args, records, meta)


if __name__ == "__main__":
    main()
