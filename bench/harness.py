"""Runs one contender on one workload in a fresh child process and turns what it measured into a record.

A fresh process per contender keeps peak RSS and I/O counters its own: the
child reads /proc/self/io around the timed part and VmHWM right after it.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np

from . import machine
from .workloads import CONTENDERS, IN_MEMORY, WORKLOADS, arrays

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_libc = ctypes.CDLL(None, use_errno=True)


def evict(paths) -> None:
    """Drops files from the page cache (fsync, then POSIX_FADV_DONTNEED), so a timed run reads the disk."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cached_fraction(path: str) -> float:
    """The fraction of a file's pages in the page cache (mincore on a fresh private mapping)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapping:
        anchor = ctypes.c_char.from_buffer(mapping)
        failed = _libc.mincore(
            ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), vec
        )
        del anchor  # the mapping cannot close while a ctypes object points into it
    if failed:
        raise OSError(ctypes.get_errno(), f"mincore failed on {path}")
    return float(np.count_nonzero(np.frombuffer(vec, np.uint8) & 1)) / pages


def proc_io() -> dict[str, int]:
    """This process's bytes read from and written to storage so far (all threads, /proc/self/io)."""
    with open("/proc/self/io") as f:
        fields = dict(line.split(": ") for line in f.read().splitlines())
    return {"read_bytes": int(fields["read_bytes"]), "write_bytes": int(fields["write_bytes"])}


def proc_status(field: str) -> int:
    """A size from /proc/self/status in bytes, e.g. VmHWM (peak RSS) or VmRSS."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def run_child(
    workload: str, contender: str, size: int, budget: int, data_dir: str, timeout: float
) -> dict:
    """The JSON a `python -m bench.run_one` child prints, or {"error": ...}."""
    data_dir = os.path.abspath(data_dir)  # the child runs in the repository root
    out_dir = os.path.join(data_dir, "out", f"{workload}-{contender}")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    cmd = [
        sys.executable,
        "-m",
        "bench.run_one",
        "--workload",
        workload,
        "--contender",
        contender,
        "--data",
        data_dir,
        "--out-dir",
        out_dir,
        "--size",
        str(size),
        "--budget",
        str(budget),
    ]
    # JAX on the CPU for every contender: Jask runs its ops on the CPU.
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
    )
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"error": f"exit status {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def measure(
    workload: str, contender: str, size: int, budget: int, data_dir: str, timeout: float
) -> dict:
    """One record of results.json: the child's measurements (`score` adds throughput and limits)."""
    wl = WORKLOADS[workload]
    plan = arrays(size, budget)
    read, written, flops = wl.cost(plan)
    if wl.derived:  # another file format of the inputs: its files on disk are what must be read
        read = sum(os.path.getsize(f) for f in wl.derived.files(data_dir, plan, budget))
    record = {
        "workload": workload,
        "title": wl.title,
        "contender": contender,
        "contender_name": CONTENDERS[contender],
        "size_bytes": size,
        "budget_bytes": budget,
        "data_bytes": read + written,
        "minimal_read_bytes": read,
        "minimal_written_bytes": written,
        "flops": flops,
        "unit": wl.unit,
        "seconds": None,
        "throughput": None,
        "limit_seconds": None,
        "limit_fraction": None,
        "peak_rss_bytes": None,
        "baseline_rss_bytes": None,
        "read_bytes": None,
        "written_bytes": None,
        "cached_fraction": None,
        "check": None,
        "io_mode": None,
        "jask_stage_seconds": None,
        "note": "",
        "error": None,
    }
    in_memory = contender in IN_MEMORY
    if in_memory and wl.input_bytes(plan) > machine.ram_bytes() // 3:
        record["note"] = (
            f"skipped: {wl.input_bytes(plan) / 2**30:.1f} GiB of inputs do not fit comfortably "
            f"in RAM ({machine.ram_bytes() / 2**30:.0f} GiB)"
        )
        return record
    record["note"] = "in memory, load excluded" if in_memory else ""
    result = run_child(workload, contender, size, budget, data_dir, timeout)
    if "error" in result:
        record["error"] = result["error"]
    else:
        record.update(result)
    return record


def median_record(runs: list[dict]) -> dict:
    """One record for a contender's rounds: the median time over them (with two rounds, their mean),
    every round's time in `seconds_runs`, the highest peak RSS of any round, and the other
    measurements of the round nearest the median."""
    done = [r for r in runs if r["seconds"] is not None]
    if not done:
        return runs[0]
    times = [r["seconds"] for r in done]
    middle = statistics.median(times)
    record = dict(min(done, key=lambda r: abs(r["seconds"] - middle)))
    record.update(
        seconds=middle,
        seconds_runs=times,
        peak_rss_bytes=max(r["peak_rss_bytes"] for r in done),
        measured_run_seconds=record["seconds"],
    )  # the round whose bytes and profile these are
    return record


def score(record: dict, limits: dict) -> None:
    """Adds throughput, the limit time and the fraction of it a record reached.

    The limit is the least time the workload's minimal traffic takes at the
    measured disk bandwidths (reads then writes, one disk) or its flops at the
    in-memory matmul rate, whichever is larger. In-memory contenders do no
    I/O while timed, so only the flops limit applies to them.
    """
    seconds = record["seconds"]
    if seconds is None:
        return
    read, written, flops = (
        record["minimal_read_bytes"],
        record["minimal_written_bytes"],
        record["flops"],
    )
    io_limit = (
        0.0
        if record["contender"] in IN_MEMORY
        else read / limits["read_bps"] + written / limits["write_bps"]
    )
    limit = max(io_limit, flops / limits["matmul_flops"])
    record["throughput"] = (
        flops / 1e9 if record["unit"] == "GFLOP/s" else (read + written) / 1e9
    ) / seconds
    record["limit_seconds"] = limit or None
    record["limit_fraction"] = limit / seconds if limit else None
