"""The data disk's sequential bandwidth with direct I/O: the limit the I/O-bound workloads are compared with."""

from __future__ import annotations

import mmap
import os
import time
from concurrent.futures import ThreadPoolExecutor

REQUEST = 16 << 20  # large aligned requests, as dd bs=16M iflag=direct
DEPTH = 4  # requests in flight, one per thread, as fast out-of-core engines issue them


def bandwidth(folder: str, nbytes: int, passes: int = 2) -> tuple[float, float]:
    """Best (read, write) bandwidth in bytes/s over `passes` passes of a `nbytes` file in `folder`.

    Requests bypass the page cache (O_DIRECT) from page-aligned buffers of
    random bytes, so neither caching nor compression flatters the result;
    DEPTH threads keep that many requests in flight. Writes are timed up to fsync.
    """
    nbytes = max(REQUEST * DEPTH, nbytes // REQUEST * REQUEST)
    path = os.path.join(folder, "disk-probe.bin")
    buffers = [mmap.mmap(-1, REQUEST) for _ in range(DEPTH)]  # page-aligned, as O_DIRECT requires
    for buf in buffers:
        buf.write(os.urandom(REQUEST))
    reads, writes = [], []
    try:
        for _ in range(passes):
            writes.append(nbytes / _timed_pass(path, nbytes, buffers, write=True))
            reads.append(nbytes / _timed_pass(path, nbytes, buffers, write=False))
    finally:
        for buf in buffers:
            buf.close()
        if os.path.exists(path):
            os.remove(path)
    return max(reads), max(writes)


def _timed_pass(path: str, nbytes: int, buffers: list[mmap.mmap], write: bool) -> float:
    flags = (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
    fd = os.open(path, flags | os.O_DIRECT, 0o644)

    def stripe(k: int) -> None:  # requests k, k + DEPTH, k + 2 DEPTH, ... from buffer k
        for offset in range(k * REQUEST, nbytes, DEPTH * REQUEST):
            done = (
                os.pwrite(fd, buffers[k], offset) if write else os.preadv(fd, [buffers[k]], offset)
            )
            if done != REQUEST:
                raise OSError(
                    f"short {'write' if write else 'read'} of {done} bytes at {offset} in {path}"
                )

    try:
        with ThreadPoolExecutor(DEPTH) as pool:
            start = time.perf_counter()
            list(pool.map(stripe, range(DEPTH)))
            if write:
                os.fsync(fd)
            return time.perf_counter() - start
    finally:
        os.close(fd)
