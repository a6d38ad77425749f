"""jask.stats(): the bytes, blocks and time of every engine op, and the peak memory.

The engine (src/engine/exec/stats.hpp) adds each call's figures to a per-op table once
the call ends; a `Stats` is the difference of that table between two moments.
"""

from __future__ import annotations

import dataclasses
import resource
import threading

import jax
import numpy as np

from . import _engine

_TIME_FIELDS = ("read_s", "compute_s", "write_s", "wall_s")
_COUNT_FIELDS = ("calls", "blocks", "bytes_read", "bytes_written")
# The contexts inside their with-block now (reset_stats would make their figures wrong).
_open_contexts = 0
_timeline_open = False
_contexts_lock = threading.Lock()  # contexts may open in several threads


@dataclasses.dataclass(frozen=True)
class OpStats:
    """What the engine did for one op (or, as `Stats.total`, for all of them).

    Attributes:
      calls: engine calls of the op.
      blocks: blocks its pipelines streamed.
      bytes_read / bytes_written: bytes read from and written to files (arrays and
        scratch arrays): exact, as the engine asked them of the file system. The header
        of a .npy file the engine opens or creates is left out, so a `save` writes the
        array's bytes; an `update_` (and `load_tree`, which copies each leaf with one)
        writes a new file beside the old and counts all of it: the old file's header and
        any other bytes outside the array are copied too.
      read_s / compute_s / write_s: seconds in each pipeline stage, summed over blocks.
        The stages overlap (a reader and a writer thread run beside the compute), so
        the stage closest to `wall_s` is what bounds the op.
      wall_s: seconds from the start to the end of its calls.
    """

    calls: int = 0
    blocks: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    read_s: float = 0.0
    compute_s: float = 0.0
    write_s: float = 0.0
    wall_s: float = 0.0

    def __add__(self, other: OpStats) -> OpStats:
        return OpStats(**{f: getattr(self, f) + getattr(other, f) for f in _fields()})

    def __sub__(self, other: OpStats) -> OpStats:
        return OpStats(**{f: getattr(self, f) - getattr(other, f) for f in _fields()})


def _fields() -> tuple[str, ...]:
    return _COUNT_FIELDS + _TIME_FIELDS


def _table_now() -> dict[str, OpStats]:
    return {op: OpStats(**fields) for op, fields in _engine.op_totals().items()}


def _peak_rss() -> int:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_now() -> int:
    """The process's resident memory now, in bytes (0 where /proc has no statm)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return 0


class Stats:
    """Per-op figures of the engine: totals since the process started (or `reset_stats`),
    or, used as a context manager, of what ran inside the with-block.

    Attributes:
      ops: {op name: `OpStats`}, the ops that ran. An op is named as its engine call:
        "matmul", "take", "transpose", a reduction ("sum", "max"), an elementwise
        program by its instructions ("add", "mul+add", "exp+sum"), "update_", "save",
        "from_numpy", "to_numpy". Inside the with-block it is live; after, fixed.
      total: the `OpStats` of all ops together.
      blocks_peak: the most bytes of block buffers alive at once: within the with-block
        (live inside it), or, taken alone, `jask.memory_stats()["blocks_peak"]` (since
        `jask.reset_memory_peak`).
      rss_peak: the process's peak resident memory in bytes (getrusage's ru_maxrss). For a
        with-block, the block's own peak where the process reached a new peak inside it;
        otherwise (the kernel keeps one peak per process) the larger of the resident memory
        at the block's start and end, a lower bound.
      timeline: with ``timeline=True``, every block's stages inside the with-block, in
        the order they ended: dicts {"stage": "read" | "compute" | "write", "op": str,
        "start": float, "end": float, "bytes": int}, seconds from the with-block's start;
        "bytes" are the bytes a read stage read or a write stage wrote (0 for compute).
        At most `TIMELINE_LIMIT` (100,000) events are kept; `timeline_dropped` counts
        the rest.
    """

    TIMELINE_LIMIT = _engine.TIMELINE_LIMIT

    def __init__(self, timeline: bool = False):
        if not isinstance(timeline, (bool, np.bool_)):
            raise TypeError(f"jask.stats(timeline=...) takes True or False, got {timeline!r}")
        self._record_timeline = bool(timeline)
        self._base: dict[str, OpStats] = {}
        self._start_ns = 0
        self._inside = False
        self._peak_scope = 0
        self._rss_at_start = self._rss_peak_at_start = 0
        self.timeline: list[dict] = []
        self.timeline_dropped = 0
        self._ops = _difference(_table_now(), self._base)
        self._blocks_peak = _engine.peak_buffer_bytes()
        self.rss_peak = _peak_rss()

    @property
    def blocks_peak(self) -> int:
        if self._inside:
            return _engine.peak_scope_bytes(self._peak_scope)
        return self._blocks_peak

    @property
    def ops(self) -> dict[str, OpStats]:
        if self._inside:
            return _difference(_table_now(), self._base)
        return dict(self._ops)

    @property
    def total(self) -> OpStats:
        total = OpStats()
        for op in self.ops.values():
            total = total + op
        return total

    def __enter__(self) -> Stats:
        global _open_contexts, _timeline_open
        with _contexts_lock:
            if self._inside:
                raise RuntimeError("jask.stats(): this Stats is already inside a with-block")
            if self._record_timeline:
                if _timeline_open:
                    raise RuntimeError(
                        "jask.stats(timeline=True) cannot be nested in another "
                        "jask.stats(timeline=True) block: the engine keeps one timeline"
                    )
                _timeline_open = True
                _engine.set_timeline(True)
            self._base = _table_now()
            self._start_ns = _engine.stats_clock_ns()
            self._peak_scope = _engine.open_peak_scope()
            self._rss_at_start, self._rss_peak_at_start = _rss_now(), _peak_rss()
            self._inside = True
            _open_contexts += 1
        return self

    def __exit__(self, *exc) -> None:
        global _open_contexts, _timeline_open
        with _contexts_lock:
            if not self._inside:
                raise RuntimeError(
                    "jask.stats(): this Stats was not entered (use it in a with-block)"
                )
        # jitted programs run asynchronously: what the block dispatched is counted once it ran
        jax.effects_barrier()
        with _contexts_lock:
            if self._record_timeline:
                _engine.set_timeline(False)
                events, self.timeline_dropped = _engine.timeline_events()
                self.timeline = [
                    {
                        "stage": stage,
                        "op": op,
                        "start": (t0 - self._start_ns) * 1e-9,
                        "end": (t1 - self._start_ns) * 1e-9,
                        "bytes": nbytes,
                    }
                    for stage, op, t0, t1, nbytes in events
                ]
                _timeline_open = False
            self._inside = False
            _open_contexts -= 1
            self._ops = _difference(_table_now(), self._base)
            self._blocks_peak = _engine.peak_scope_bytes(self._peak_scope)
            _engine.close_peak_scope(self._peak_scope)
            peak = _peak_rss()
            if peak > self._rss_peak_at_start:
                self.rss_peak = peak  # the process's new peak was reached inside the block
            else:
                self.rss_peak = max(self._rss_at_start, _rss_now())

    def __str__(self) -> str:
        return _format(self.ops, self.total, self.blocks_peak, self.rss_peak)

    def __repr__(self) -> str:
        t = self.total
        return (
            f"Stats({len(self.ops)} ops, {t.calls} calls, read {_size(t.bytes_read)}, "
            f"wrote {_size(t.bytes_written)}, {t.wall_s:.3f} s)"
        )


def _difference(now: dict[str, OpStats], base: dict[str, OpStats]) -> dict[str, OpStats]:
    out = {}
    for op, figures in now.items():
        d = figures - base.get(op, OpStats())
        if d.calls:
            out[op] = d
    return out


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _format(ops: dict[str, OpStats], total: OpStats, blocks_peak: int, rss_peak: int) -> str:
    header = (
        "op",
        "calls",
        "blocks",
        "read",
        "written",
        "read s",
        "compute s",
        "write s",
        "wall s",
    )
    rows = [header]
    ordered = sorted(ops.items(), key=lambda kv: -kv[1].wall_s)
    for name, s in [*ordered, ("total", total)]:
        rows.append(
            (
                name,
                str(s.calls),
                str(s.blocks),
                _size(s.bytes_read),
                _size(s.bytes_written),
                *(f"{getattr(s, f):.3f}" for f in _TIME_FIELDS),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    lines.append(f"peak memory: blocks {_size(blocks_peak)}, process RSS {_size(rss_peak)}")
    return "\n".join(lines)


def stats(timeline: bool = False) -> Stats:
    """The engine's figures per op: bytes read and written, blocks, time in each pipeline
    stage and wall time, and the peak memory.

    Called alone, the totals since the process started (or `reset_stats`). As a context
    manager, what ran inside the with-block: eager ops and the engine calls of jitted
    programs alike, and the peak memory within the block. Contexts may nest (each counts
    what ran inside it), except two with ``timeline=True``. The figures are the process's:
    a with-block in one thread also counts the engine calls other threads ran meanwhile.

    Args:
      timeline: also record every block's read, compute and write stage (`Stats.timeline`),
        while inside the with-block.

    Returns:
      A `Stats`; ``print`` it for a table.

    >>> import numpy as np, jax.numpy as jnp, jask
    >>> x = jask.DiskArray.from_numpy(np.ones(1000, np.float32))
    >>> with jask.stats() as s:
    ...     total = jnp.sum(x)
    >>> s.ops["sum"].bytes_read
    4000
    """
    return Stats(timeline=timeline)


def reset_stats() -> None:
    """Starts the totals that `jask.stats()` reports again from zero.

    Raises:
      RuntimeError: inside a ``with jask.stats()`` block (its figures would go wrong).
    """
    with _contexts_lock:
        if _open_contexts:
            raise RuntimeError("jask.reset_stats() cannot run inside a `with jask.stats()` block")
        _engine.reset_op_totals()
