"""The data disk's limits: sequential read and write bandwidth and random-read rates, the limits the
I/O-bound workloads are compared with, and an optional `fio` reference for them.

Every measurement keeps several requests in flight: one thread per request, each blocking in its
own os.preadv / os.pwrite (both release the GIL), so the device sees a queue of them as fast
out-of-core engines (and fio with an iodepth) issue them. Sequential reads are measured both
ways, direct (O_DIRECT) and buffered (the page cache's readahead, from a file evicted first), and the
limit is the better of the two: a contender may use either.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# (request bytes, requests in flight): large aligned requests as out-of-core engines issue them;
# the disk's queue sees 8 or more either way (the kernel splits a 16 MiB request into several).
DIRECT = [(16 << 20, 4), (4 << 20, 16)]
BUFFERED = [(16 << 20, 2)]  # readahead does best with few streams
WRITE = (4 << 20, 16)
RANDOM_DEPTH = 32  # random requests in flight
RANDOM_SMALL, RANDOM_LARGE = 4 << 10, 64 << 10  # random request sizes: IOPS, and bytes/s of rows
RANDOM_SECONDS = 1.5  # each random pass on a 1 GiB probe file runs this long (less on smaller ones)
PROBE_NAME = "disk-probe.bin"
# The run probes the disk again before each workload's pass in each regime (a smaller file, one
# pass), and scores the pass's records against the better of the probes just before and just
# after it: the shared disk drifts tens of percent over minutes, so a rate measured a quarter of
# an hour (or one workload) away is not the limit a run had. The best rate of the whole run gives
# a second, stricter fraction.
WORKLOAD_PROBE_BYTES = 256 << 20
_SPAN = max(r * d for r, d in DIRECT + BUFFERED + [WRITE])


def bandwidth(folder: str, nbytes: int, passes: int = 2) -> dict:
    """The disk's limits in `folder`, best over `passes` passes of a `nbytes` file.

    Returns read_direct_bps (the best of the DIRECT configurations), read_buffered_bps (of the
    BUFFERED ones, each from a file evicted first), read_bps (the better of those two), write_bps
    (direct, timed up to fsync), random_read_iops (RANDOM_SMALL direct reads at random aligned
    offsets, RANDOM_DEPTH in flight) and random_read_bps (the same with RANDOM_LARGE requests), and
    probe_seconds. Buffers are page-aligned and hold random bytes, so neither caching nor
    compression flatters the result.
    """
    started = time.perf_counter()
    nbytes = max(_SPAN, nbytes // _SPAN * _SPAN)
    path = os.path.join(folder, PROBE_NAME)
    seconds = max(0.1, RANDOM_SECONDS * min(1.0, nbytes / (1 << 30)))
    with io_buffer(_SPAN) as buffer:
        buffer[:] = os.urandom(_SPAN)
        found: dict[str, list[float]] = {}
        try:
            for _ in range(passes):
                runs = {
                    "write_bps": [nbytes / _sequential(path, nbytes, buffer, *WRITE, write=True)],
                    "read_direct_bps": [
                        nbytes / _sequential(path, nbytes, buffer, *c, direct=True) for c in DIRECT
                    ],
                    "read_buffered_bps": [
                        nbytes / _sequential(path, nbytes, buffer, *c, direct=False)
                        for c in BUFFERED
                    ],
                    "random_read_iops": [_random(path, nbytes, RANDOM_SMALL, seconds)[0]],
                    "random_read_bps": [_random(path, nbytes, RANDOM_LARGE, seconds)[1]],
                }
                for key, values in runs.items():
                    found.setdefault(key, []).extend(values)
        finally:
            if os.path.exists(path):
                os.remove(path)
    best = {key: max(values) for key, values in found.items()}
    best["read_bps"] = max(best["read_direct_bps"], best["read_buffered_bps"])
    best["probe_seconds"] = time.perf_counter() - started
    return best


def huge_page_bytes() -> int:
    """The kernel's transparent huge page size (2 MiB where it does not say)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 2 << 20


@contextlib.contextmanager
def io_buffer(nbytes: int):
    """A writable memoryview of `nbytes` of private anonymous memory that starts on a huge page and
    asks for transparent huge pages, as Jask's engine's block buffers do (io/file.cpp's map_pages):
    a direct request into 4 KiB pages reaches a device as at most its segments per request in
    pages (512 KiB requests on this machine's virtio disk), into huge pages as requests of up to its
    max_sectors_kb, 2.1-2.5 GB/s against 1.4 GB/s here. A probe into small pages would measure
    the buffers, not the disk."""
    huge = huge_page_bytes()
    with mmap.mmap(-1, nbytes + huge, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as memory:
        if hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                memory.madvise(mmap.MADV_HUGEPAGE)
            except OSError:  # a kernel without transparent huge pages
                pass
        address = np.frombuffer(memory, np.uint8).ctypes.data
        start = -address % huge
        view = memoryview(memory)[start : start + nbytes]
        try:
            yield view
        finally:
            view.release()


def describe() -> str:
    """What `bandwidth` measures, for the reports."""

    def configs(pairs) -> str:
        return " or ".join(f"{r >> 20} MiB x {d}" for r, d in pairs)

    return (
        f"sequential reads direct ({configs(DIRECT)} in flight) and buffered from an evicted file "
        f"({configs(BUFFERED)}), direct writes ({configs([WRITE])}); random direct reads of "
        f"{RANDOM_SMALL >> 10} KiB and {RANDOM_LARGE >> 10} KiB, {RANDOM_DEPTH} in flight"
    )


def _evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _sequential(
    path: str,
    nbytes: int,
    buffer: memoryview,
    request: int,
    depth: int,
    write: bool = False,
    direct: bool = True,
) -> float:
    """Seconds to write or read `nbytes` of `path` front to back, `depth` requests of `request`
    bytes in flight, each in its own slice of `buffer`."""
    if not write and not direct:
        _evict(path)  # buffered reads must come from the disk, not from the cache
    flags = (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
    fd = os.open(path, flags | (os.O_DIRECT if direct else 0), 0o644)
    views = [buffer[k * request : (k + 1) * request] for k in range(depth)]
    # Requests are handed out in file order from one counter, so the disk sees one stream with
    # `depth` requests in flight (as readahead and io_uring engines issue it), not `depth` streams.
    next_offset = iter(range(0, nbytes, request))
    lock = threading.Lock()

    def worker(k: int) -> None:
        while True:
            with lock:
                offset = next(next_offset, None)
            if offset is None:
                return
            done = os.pwrite(fd, views[k], offset) if write else os.preadv(fd, [views[k]], offset)
            if done != request:
                raise OSError(
                    f"short {'write' if write else 'read'} of {done} bytes at {offset} in {path}"
                )

    try:
        with ThreadPoolExecutor(depth) as pool:
            start = time.perf_counter()
            list(pool.map(worker, range(depth)))
            if write:
                os.fsync(fd)
            return time.perf_counter() - start
    finally:
        os.close(fd)
        for view in views:
            view.release()


def _random(path: str, nbytes: int, request: int, seconds: float) -> tuple[float, float]:
    """(requests/s, bytes/s) of direct reads of `request` bytes at random aligned offsets of `path`,
    RANDOM_DEPTH in flight, for `seconds`."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    counts = [0] * RANDOM_DEPTH

    def worker(k: int) -> None:
        buf = mmap.mmap(-1, request)
        rng = np.random.default_rng(k)
        offsets = (rng.integers(0, nbytes // request, 1 << 16) * request).tolist()
        try:
            while time.perf_counter() < deadline:  # checked every 64 requests
                i = counts[k] % len(offsets)
                for offset in offsets[i : i + 64]:
                    if os.preadv(fd, [buf], offset) != request:
                        raise OSError(f"short read at {offset} in {path}")
                counts[k] += 64
        finally:
            buf.close()

    try:
        with ThreadPoolExecutor(RANDOM_DEPTH) as pool:
            start = time.perf_counter()
            deadline = start + seconds
            list(pool.map(worker, range(RANDOM_DEPTH)))
            seconds = time.perf_counter() - start
    finally:
        os.close(fd)
    rate = sum(counts) / seconds
    return rate, rate * request


FIO_JOBS = {  # name: (rw, bs, iodepth), all direct with io_uring (libaio where it is missing)
    "read_bps": ("read", "4m", 16),
    "write_bps": ("write", "4m", 16),
    "random_read_iops": ("randread", "4k", RANDOM_DEPTH),
    "random_read_bps": ("randread", "64k", RANDOM_DEPTH),
}


def fio(folder: str, nbytes: int, runtime: float = 3.0) -> dict:
    """The same limits measured by fio, as a reference for ours, or {"error": why} where it cannot run."""
    exe = shutil.which("fio")
    if not exe:
        return {"error": "fio is not on PATH (Debian: apt-get install fio)"}
    path = os.path.join(folder, "fio-probe.bin")
    out = {}
    try:
        for key, (rw, bs, depth) in FIO_JOBS.items():
            for engine in ("io_uring", "libaio"):
                cmd = [
                    exe,
                    "--name=probe",
                    f"--filename={path}",
                    f"--size={nbytes}",
                    f"--rw={rw}",
                    f"--bs={bs}",
                    f"--iodepth={depth}",
                    f"--ioengine={engine}",
                    "--direct=1",
                    "--time_based",
                    f"--runtime={max(1, round(runtime * 1000))}ms",
                    "--output-format=json",
                ]
                run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                if run.returncode == 0:
                    break
            else:
                return {"error": f"fio {rw} failed: {run.stderr.strip()[-300:]}"}
            job = json.loads(run.stdout[run.stdout.index("{") :])["jobs"][0]
            side = job["write" if rw == "write" else "read"]
            out[key] = side["iops"] if key.endswith("iops") else side["bw_bytes"]
            out["engine"] = engine
    finally:
        if os.path.exists(path):
            os.remove(path)
    return out
