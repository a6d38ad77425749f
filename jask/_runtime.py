"""The engine as a process-wide service: budget, scratch space, BLAS, FFI targets.

Scratch is configured lazily, on the first array Jask creates, so importing
jask writes nothing to disk. This process's scratch folder goes at exit and on
SIGINT, SIGTERM and SIGHUP (where the user has not handled them).
"""

from __future__ import annotations

import atexit
import fractions
import os
import re
import signal
import threading

import jax
import numpy as np

from . import _engine

DEFAULT_SCRATCH_DIR = ".jask_scratch"

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1 << 10,
    "MB": 1 << 20,
    "GB": 1 << 30,
    "TB": 1 << 40,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
}
_scratch_request: tuple[str, bool] = (DEFAULT_SCRATCH_DIR, False)


# The engine's bounds on the budget (base/memory_budget.hpp), checked here too: a Python int
# beyond int64 would not reach the engine's check.
MIN_BUDGET, MAX_BUDGET = _engine.MIN_BUDGET, _engine.MAX_BUDGET


def parse_size(size: int | str) -> int:
    """Bytes in `size`: an int, or a string like "64KB", "512MB", "1GB" (binary units:
    "1KB" is 1024 bytes), between MIN_BUDGET and MAX_BUDGET."""
    if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer, str)):
        raise TypeError(
            f"memory budget must be an int of bytes or a string like '64KB', '512MB', "
            f"'1GB'; got {size!r} of type {type(size).__name__}"
        )
    nbytes = None
    if isinstance(size, (int, np.integer)):
        nbytes = int(size)
    elif isinstance(size, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", size)
        if match and match.group(2).upper() in _UNITS:
            nbytes = int(fractions.Fraction(match.group(1)) * _UNITS[match.group(2).upper()])
    if nbytes is None:
        raise ValueError(
            f"memory budget must be an int of bytes or a string like '64KB', '512MB', "
            f"'1GB'; got {size!r}"
        )
    if not MIN_BUDGET <= nbytes <= MAX_BUDGET:
        raise ValueError(
            f"memory budget must be between {MIN_BUDGET} bytes and {MAX_BUDGET} bytes (2**60); "
            f"got {size!r} ({nbytes} bytes)"
        )
    return nbytes


def set_memory_budget(
    budget: int | str, scratch_dir: str | os.PathLike | None = None, allow_tmpfs: bool = False
) -> None:
    """Bounds all of Jask's buffers and chooses where scratch arrays live.

    Args:
      budget: bytes for blocks being computed, prefetched and written behind
        (1024 bytes to 2**60): an int, or a string such as "64KB", "512MB", "1GB"
        (binary units: "1KB" is 1024 bytes, "1GB" 2**30). Another type is a TypeError.
      scratch_dir: folder for op outputs and gradients; default
        ``.jask_scratch`` in the current directory (``""`` is a ValueError).
        Each process uses a folder of its own inside it (0700, marked as
        Jask's), removed at exit; folders that are not Jask's are never removed.
      allow_tmpfs: accept a RAM-backed file system (tmpfs, ramfs) for scratch.

    >>> import jask
    >>> jask.set_memory_budget("64MB")
    """
    global _scratch_request
    nbytes = parse_size(budget)
    root = os.fspath(scratch_dir) if scratch_dir is not None else DEFAULT_SCRATCH_DIR
    if not isinstance(root, str):
        raise TypeError(f"scratch_dir must be a str or os.PathLike of str, got {scratch_dir!r}")
    if root == "":
        raise ValueError(
            'scratch_dir must name a folder; got "" (it is not taken to mean the current '
            'folder: scratch files would land among the user\'s). Pass "." to mean that.'
        )
    if not isinstance(allow_tmpfs, bool):
        raise TypeError(f"allow_tmpfs must be a bool, got {allow_tmpfs!r}")
    _engine.set_memory_budget(nbytes)
    _scratch_request = (root, allow_tmpfs)
    if scratch_dir is not None or _engine.scratch_configured():
        _engine.configure_scratch(os.path.abspath(root), allow_tmpfs)


def set_io_mode(mode: str) -> None:
    """How large reads reach the disk: "direct" (O_DIRECT, bypassing the page cache: the
    fastest on local NVMe), "buffered" (several concurrent reads through the page cache with
    the kernel's readahead, marked as used once so they are the first pages the kernel reclaims:
    faster on some virtual disks), or
    "auto" (the default: reads of 8 MiB or more run in phases of 128 MiB, all of a phase one way,
    direct and buffered in turn, until each way has read 256 MiB; then the way that moved more
    bytes per second of its phases' wall time is kept for the process. Under a memory cgroup
    limit "auto" reads direct, unmeasured: buffered reads there fill the limit with page cache and
    pay its reclaim. Smaller reads go direct meanwhile, and a matmul's short column-panel reads
    stay direct once "auto" has settled on buffered: readahead around them would read the file
    about twice).

    >>> import jask
    >>> jask.set_io_mode("auto")
    """
    if mode not in ("auto", "direct", "buffered"):
        raise ValueError(
            f"jask.set_io_mode: unknown mode {mode!r}; expected 'auto', 'direct' or 'buffered'"
        )
    _engine.set_read_mode(mode)


def io_mode() -> str:
    """The read mode in use: "direct" or "buffered", or "auto" until auto has measured both."""
    return _engine.read_mode()


def set_scratch_recycling(enabled: bool) -> None:
    """Whether the files of freed scratch arrays are reused for new op outputs (the default: True).

    Overwriting blocks a file already owns can be much faster than writing new ones: on a
    file system mounted with `discard` over a thin-provisioned virtual disk, freed blocks go
    back to the host and are allocated again on the next write (about 30% slower here). A
    training step's outputs then land in the files of the previous step's. Only ops that
    write every byte of their output get a recycled file; the pool holds at most as many
    bytes as the live scratch arrays, so scratch space at most doubles. Turning it off
    deletes the pooled files.

    >>> import jask
    >>> jask.set_scratch_recycling(True)
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"jask.set_scratch_recycling: expected a bool, got {enabled!r}")
    _engine.set_scratch_recycling(enabled)


def memory_budget() -> int:
    """The current memory budget in bytes."""
    return _engine.memory_budget()


def new_program_slot() -> int:
    """A slot for what one jitted program over DiskArrays holds in memory (see
    `note_program_memory`)."""
    return _engine.new_program_slot()


def note_program_memory(calls: dict[int, int], nbytes: int) -> None:
    """XLA compiled a program whose engine calls name the slots of `calls` (each with its
    count of calls per run, 0 where not known): while it runs, XLA holds `nbytes` in memory
    (temporaries and in-memory results), which its engine calls leave out of the blocks they
    plan (up to half the budget). The counts size a first run's progress bar."""
    for slot, count in calls.items():
        _engine.note_program_bytes(slot, int(nbytes))
        _engine.note_program_calls(slot, int(count))


def memory_stats() -> dict[str, int]:
    """Where the memory budget goes, in bytes.

    - ``budget``: the budget (`set_memory_budget`).
    - ``largest_program``: the most that XLA holds in memory (temporaries and in-memory
      results) while one jitted program over DiskArrays compiled so far runs. A program's
      engine calls plan their blocks in the budget less its figure, less at most half the
      budget: a program holding more than half the budget in memory goes over the budget.
    - ``blocks_now`` / ``blocks_peak``: bytes of Jask's block buffers alive now and the most at
      once since `reset_memory_peak`. Engine calls take turns, so the peak is at most the
      budget less what the running program holds.
    """
    return {
        "budget": _engine.memory_budget(),
        "largest_program": _engine.largest_program_bytes(),
        "blocks_now": _engine.buffer_bytes(),
        "blocks_peak": _engine.peak_buffer_bytes(),
    }


def reset_memory_peak() -> None:
    """Starts `memory_stats()["blocks_peak"]` again from the block buffers alive now."""
    _engine.reset_peak_buffer_bytes()


def ensure_scratch() -> None:
    """Creates this process's scratch folder on first use."""
    if not _engine.scratch_configured():
        root, allow_tmpfs = _scratch_request
        _engine.configure_scratch(os.path.abspath(root), allow_tmpfs)


def scratch_dir() -> str:
    """This process's scratch folder."""
    ensure_scratch()
    return _engine.scratch_process_dir()


# -- freeing the handles of arrays that programs may still read -----------------------
#
# JAX dispatches a jitted program (and an eager lax.scan, while_loop or cond, which JAX runs
# as one) asynchronously: the call returns before the program has run, and a temporary
# DiskArray passed to it, `f(x + 1.0)`, loses its last Python reference at once. A DiskArray
# that has been passed to a program therefore frees its handle only after every program
# dispatched so far has run (jax.effects_barrier: every Jask call in a program is an FFI call
# with a side effect, so JAX tracks its completion). Arrays never passed to a program (eager
# ops read their operands before returning) are freed at once.

_after_programs: list[int] = []
_after_programs_lock = threading.Lock()


def release_handle(handle: int, passed_to_program: bool) -> None:
    """Drops one Python reference to an engine handle (DiskArray.__del__)."""
    if not passed_to_program:
        _engine.release(handle)
        return
    with _after_programs_lock:
        _after_programs.append(handle)
    # A host callback runs inside its program, on a thread of XLA's (Python sees a thread it
    # did not start as a _DummyThread): waiting there for the programs in flight would wait
    # for itself. Its handles go with the next wait.
    if not isinstance(threading.current_thread(), threading._DummyThread):
        release_after_programs()


def release_after_programs() -> None:
    """Waits for the programs dispatched so far, then frees the handles dropped meanwhile."""
    jax.effects_barrier()
    with _after_programs_lock:
        handles = _after_programs[:]
        del _after_programs[:]
    for handle in handles:
        _engine.release(handle)


def _load_blas() -> None:
    try:
        import scipy_openblas32
    except ImportError:  # the engine falls back to its own loops
        return
    lib = os.path.join(scipy_openblas32.get_lib_dir(), f"lib{scipy_openblas32.get_library()}.so")
    _engine.load_blas(lib, os.cpu_count() or 1)


def _register_ffi_targets() -> None:
    for name, capsule in _engine.ffi_targets().items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")


def _remove_scratch_and_die(signum, frame) -> None:
    """SIGTERM and SIGHUP: this process's scratch folder goes, then the signal kills the process
    as it would have (the exit status says so). A forked child leaves its parent's folder."""
    folder = os.path.basename(_engine.scratch_process_dir())
    if folder.startswith(f"proc-{os.getpid()}-"):
        _engine.remove_scratch()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _clean_up_on_signals() -> None:
    """Installs the handler for the signals whose default kills the process without running
    atexit; a signal the user handles or ignores (nohup) is left alone. SIGINT raises
    KeyboardInterrupt, so exit cleans up after it already."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers; exit still cleans up
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _remove_scratch_and_die)


_IMPORTED_BY = os.getpid()


def _shut_down() -> None:
    """At exit: frees every array and removes this process's scratch folder. A child forked
    after import exits without it: the arrays and folder it inherited are its parent's."""
    if os.getpid() == _IMPORTED_BY:
        _engine.shutdown()


_load_blas()
_register_ffi_targets()
atexit.register(_shut_down)
_clean_up_on_signals()
