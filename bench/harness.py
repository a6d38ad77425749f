"""Runs one contender on one workload in a fresh child process and turns what it measured into a record.

A fresh process per contender keeps peak RSS and I/O counters its own: the
child reads /proc/self/io around the timed part and VmHWM right after it.
Under a memory cap the child runs in its own cgroup (bench/cgroup.py), whose
peak charge counts the page cache it brought in as well as its RSS.
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
import threading
import time

import numpy as np

from . import machine
from .cgroup import CgroupUnavailable, create_memory_cgroup
from .workloads import CAP_RATIO, CONTENDERS, GIB, IN_MEMORY, MIB, WORKLOADS, arrays

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


def size_text(nbytes: int) -> str:
    """1073741824 -> "1 GiB", 134217728 -> "128 MiB"."""
    return f"{nbytes / GIB:g} GiB" if nbytes >= GIB else f"{nbytes / MIB:g} MiB"


def regime_text(cap: int | None) -> str:
    """A regime's name in reports: "uncapped", or "cap 1 GiB"."""
    return f"cap {size_text(cap)}" if cap else "uncapped"


# Under --minutes (bench/__main__.py), no contender's timed part gets more than PEER_FACTOR times
# the fastest finished out-of-core run of the workload (at least PEER_MIN_SECONDS): one thrashing
# peer (Dask's gathers under the cap took 158 s where Jask took 2) would leave the later workloads
# no time, and a peer cut off there is still recorded, at 5x Jask's time or more. The child's setup
# (opening data, restoring a table, compiling) is not bounded by it, only by the run's share of the
# budget.
PEER_FACTOR = 5
PEER_MIN_SECONDS = 30

# The line a child prints (and flushes) when its setup is done and its timed part starts.
SETUP_DONE = "bench.run_one: setup done"


def run_child(
    workload: str,
    contender: str,
    size: int,
    budget: int,
    data_dir: str,
    timeout: float,
    cap: int | None = None,
    timeline: str | None = None,
    timed_timeout: float | None = None,
) -> dict:
    """The JSON a `python -m bench.run_one` child prints, or {"error": ...}; under a `cap` (bytes)
    also cgroup_peak_bytes and killed_by_cap, and for a killed child the highest VmHWM seen.

    The child may run `timeout` seconds in all, and its timed part (from its SETUP_DONE line)
    at most `timed_timeout` of them."""
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
    cmd += (["--cap", str(cap)] if cap else []) + (
        ["--timeline", os.path.abspath(timeline)] if timeline else []
    )
    # JAX on the CPU for every contender: Jask runs its ops on the CPU.
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
    )
    try:
        cgroup = create_memory_cgroup(cap, "jask-bench") if cap else None
    except (
        CgroupUnavailable
    ) as e:  # checked at the start (bench/__main__.py); recorded if it fails now
        shutil.rmtree(out_dir, ignore_errors=True)
        return {"error": f"no memory cgroup for the {size_text(cap)} cap: {e}"}
    try:
        proc = subprocess.Popen(
            cgroup.command(cmd) if cgroup else cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        hwm = _HighWaterMark(proc) if cgroup else None
        child = _ChildOutput(proc)
        timed_out = child.wait(timeout, timed_timeout)
        if timed_out:
            proc.kill()
            proc.wait()
        stdout, stderr = child.finish()
        capped = {}
        if cgroup:
            hwm.join()
            capped = {
                "cgroup_peak_bytes": cgroup.peak_bytes(),
                "killed_by_cap": not timed_out and cgroup.oom_kills() > 0,
                "vmhwm_seen_bytes": hwm.bytes,
            }
    finally:
        if cgroup:
            cgroup.remove()
        shutil.rmtree(out_dir, ignore_errors=True)
    if timed_out:
        return {"error": timed_out, **capped}
    if capped.get("killed_by_cap"):
        return {"error": killed_text(cap, capped), **capped}
    lines = stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"error": f"exit status {proc.returncode}: {tail}", **capped}
    return dict(json.loads(lines[-1]), **capped)


def killed_text(cap: int, capped: dict) -> str:
    """ "killed by the 1 GiB cap at 1024 MiB (VmHWM 700 MiB or more)"."""
    peak = capped["cgroup_peak_bytes"]
    text = f"killed by the {size_text(cap)} cap" + (
        f" at {peak / MIB:.0f} MiB" if peak is not None else ""
    )
    if capped["vmhwm_seen_bytes"]:
        text += f" (VmHWM {capped['vmhwm_seen_bytes'] / MIB:.0f} MiB or more)"
    return text


class _ChildOutput:
    """A child's stdout and stderr, read by threads as it runs; notes when it prints SETUP_DONE."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.started = time.monotonic()
        self.setup_seconds: float | None = None
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=lambda: self.errors.extend(proc.stderr), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            if line.strip() == SETUP_DONE:
                self.setup_seconds = time.monotonic() - self.started
            else:
                self.lines.append(line)

    def wait(self, timeout: float, timed_timeout: float | None) -> str:
        """Waits for the child to exit: "" if it did, else why it is to be killed (its whole run
        past `timeout` seconds, or its timed part past `timed_timeout`)."""
        while True:
            now = time.monotonic()
            if now >= self.started + timeout:
                if self.setup_seconds is None:
                    return f"timed out after {timeout:.0f} s, in its setup"
                return f"timed out after {timeout:.0f} s (setup {self.setup_seconds:.0f} s)"
            deadline = self.started + timeout
            if self.setup_seconds is not None and timed_timeout is not None:
                timed_deadline = self.started + self.setup_seconds + timed_timeout
                if now >= timed_deadline:
                    return (
                        f"timed out after {timed_timeout:.0f} s of its timed part "
                        f"(setup {self.setup_seconds:.0f} s)"
                    )
                deadline = min(deadline, timed_deadline)
            try:
                self.proc.wait(timeout=min(0.2, deadline - now))
                return ""
            except subprocess.TimeoutExpired:
                continue

    def finish(self) -> tuple[str, str]:
        """The child's stdout (less SETUP_DONE) and stderr, once it has exited."""
        for t in self._threads:
            t.join()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return "".join(self.lines), "".join(self.errors)


class _HighWaterMark(threading.Thread):
    """Polls a child's VmHWM while it runs: the peak RSS of a child the kernel kills, which cannot
    report its own (the last reading, so a lower bound)."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.proc, self.bytes = proc, None
        self.start()

    def run(self) -> None:
        status = f"/proc/{self.proc.pid}/status"
        while self.proc.poll() is None:
            try:
                with open(status) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.bytes = int(line.split()[1]) * 1024
            except (OSError, ValueError):  # the child is exiting
                pass
            time.sleep(0.05)


def measure(
    workload: str,
    contender: str,
    size: int,
    budget: int,
    data_dir: str,
    timeout: float,
    cap: int | None = None,
    timeline: str | None = None,
    not_run: str = "",
    timed_timeout: float | None = None,
) -> dict:
    """One record of results.json: the child's measurements (`score` adds throughput and limits),
    run under a memory cgroup capped at `cap` bytes when given; with `timeline` (a path), the
    child records Jask's I/O timeline there. With `not_run` (why), the record without a run.
    The child runs at most `timeout` seconds, its timed part at most `timed_timeout`."""
    wl = WORKLOADS[workload]
    plan = arrays(size, budget, cap)
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
        "cap_bytes": cap,
        # what the workload works over: its traffic, or its inputs where it reads rows of them
        # at random (W6, W8), so the capped regime's 4x rule is about the data on disk
        "data_bytes": max(read + written, wl.input_bytes(plan)),
        "minimal_read_bytes": read,
        "minimal_written_bytes": written,
        "flops": flops,
        "unit": wl.unit,
        "items": wl.items(plan) if wl.items else None,
        "seconds": None,
        "throughput": None,
        "limit_seconds": None,
        "limit_fraction": None,
        "limit_bound": None,
        "peak_rss_bytes": None,
        "baseline_rss_bytes": None,
        "cgroup_peak_bytes": None,
        "killed_by_cap": False,
        "vmhwm_seen_bytes": None,
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
    if not_run:
        record["error"] = not_run
        return record
    result = run_child(
        workload, contender, size, budget, data_dir, timeout, cap, timeline, timed_timeout
    )
    record.update(result)
    return record


def small_data(record: dict) -> bool:
    """A capped record whose data is under CAP_RATIO times its cap: not the out-of-core regime."""
    cap = record.get("cap_bytes")  # None in records from before the cap
    return bool(cap) and record["data_bytes"] < CAP_RATIO * cap


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
        cgroup_peak_bytes=max((r["cgroup_peak_bytes"] or 0 for r in done), default=0) or None,
        measured_run_seconds=record["seconds"],
    )  # the round whose bytes and profile these are
    return record


def score(record: dict, limits: dict) -> None:
    """Adds throughput, the limit time, the fraction of it a record reached and what bounds it
    (limit_bound: "disk" or "compute").

    The limit is the least time the workload's minimal traffic takes at the
    measured disk bandwidths (reads then writes, one disk) or its flops at the
    in-memory matmul rate, whichever is larger; a workload with its own
    `limit_seconds` (random reads: bound by the disk's random-read rate) gives
    its limit instead. In-memory contenders do no I/O while timed, so only the
    flops limit applies to them.
    """
    seconds = record["seconds"]
    if seconds is None:
        return
    read, written, flops = (
        record["minimal_read_bytes"],
        record["minimal_written_bytes"],
        record["flops"],
    )
    own = WORKLOADS[record["workload"]].limit_seconds
    if record["contender"] in IN_MEMORY:
        io_limit = 0.0
    elif own:
        plan = arrays(record["size_bytes"], record["budget_bytes"], record.get("cap_bytes"))
        io_limit = own(plan, limits)
    else:
        io_limit = read / limits["read_bps"] + written / limits["write_bps"]
    compute_limit = flops / limits["matmul_flops"]
    limit = max(io_limit, compute_limit)
    record["limit_bound"] = "disk" if io_limit >= compute_limit and limit else "compute"
    if record.get("items"):  # samples, passes or steps per second
        record["throughput"] = record["items"] / seconds
    else:
        record["throughput"] = (
            flops / 1e9 if record["unit"] == "GFLOP/s" else (read + written) / 1e9
        ) / seconds
    record["limit_seconds"] = limit or None
    record["limit_fraction"] = limit / seconds if limit else None
