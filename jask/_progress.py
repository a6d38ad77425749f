"""Progress bars for long engine calls, save_tree / load_tree and conversions.

The engine counts the running call's blocks and bytes (src/engine/exec/stats.hpp) as it
runs; a daemon thread here waits in the engine (without the GIL) until a call starts,
then polls those counters every `_POLL_S` seconds while it runs, and shows a tqdm bar
on stderr for a call that has run for `_threshold_s` or whose projected time (its
blocks planned at the rate of the blocks done) exceeds it. Nothing runs in the engine's
per-block loop besides the counters it keeps anyway.

Calls of a jitted program get one bar each (the program's engine calls run one after
another, each its own pipeline), named "jit: <op>". A Python operation made of many
engine calls (save_tree, load_tree) opens a `task`: one bar for all of it, counting the
bytes of the leaves done.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

from . import _engine

# How often a running call's bar is brought up to date.
_POLL_S = 0.2
# Seconds a call (or a task) runs, or is projected to run, before it gets a bar.
# Private knob: the tests set it to 0.
_threshold_s = 2.0
_enabled = os.environ.get("JASK_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")

# Held while the bars change (by the poller thread, a task's thread, or _flush).
_lock = threading.RLock()
_poller: threading.Thread | None = None


def set_progress(enabled: bool) -> None:
    """Turns the progress bars on (the default) or off.

    Bars appear on stderr for engine calls, jitted programs' engine calls, `save_tree`,
    `load_tree` and conversions (`DiskArray.from_numpy`, saving, `materialize`) that run
    longer than about two seconds, or are projected to. They cost the engine nothing per
    block: a background thread reads the engine's counters five times a second while a
    call runs. The environment variable ``JASK_PROGRESS=0`` turns them off at import.

    Args:
      enabled: True to show bars, False to show none (an open bar is closed).

    >>> import jask
    >>> jask.set_progress(False)
    >>> jask.progress_enabled()
    False
    >>> jask.set_progress(True)
    """
    global _enabled
    with _lock:
        _enabled = bool(enabled)
        if not _enabled:
            _BARS.close_all()
    if _enabled:
        _ensure_poller()


def progress_enabled() -> bool:
    """Whether progress bars are shown (`set_progress`)."""
    return _enabled


def _now_s() -> float:
    return _engine.stats_clock_ns() * 1e-9


def _new_bar(desc: str, total: int, done: int = 0):
    """A bar of `total` bytes, `done` of them before it opened (left out of its rate)."""
    from tqdm import tqdm  # imported on the first bar: tqdm's import is not free

    return tqdm(
        total=max(int(total), int(done)),
        initial=int(done),
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        leave=True,
        dynamic_ncols=True,
        mininterval=0,
    )


def _finish(bar, nbytes: int) -> None:
    """Ends `bar` at 100% with `nbytes` done."""
    bar.total = max(int(nbytes), bar.n)
    bar.n = bar.total
    bar.close()  # draws it once more


def _expected_s(elapsed: float, done: int, planned: int) -> float:
    """How long a call runs, as far as its first `done` blocks of `planned` tell: projected
    only once it has run a quarter of the threshold (its first blocks are no rate yet)."""
    if elapsed < _threshold_s / 4:
        return elapsed
    return max(elapsed, _projected(elapsed, done, planned))


def _projected(value: float, done: int, planned: int) -> float:
    """`value` (seconds, bytes) after `planned` blocks, at its rate over the first `done`."""
    return value * planned / done if done > 0 else value


class _Task:
    """One bar over many engine calls (a save_tree): bytes of finished steps, plus the
    running call's share of its step."""

    def __init__(self, name: str, total: int):
        self.name = name
        self.total = int(total)
        self.start = _now_s()
        self.done = 0
        self.step_bytes = 0
        self.bar = None

    @contextlib.contextmanager
    def step(self, nbytes: int) -> Iterator[None]:
        """A part of the task worth `nbytes` of its total."""
        with _lock:
            self.step_bytes = int(nbytes)
        try:
            yield
        finally:
            with _lock:
                self.done += self.step_bytes
                self.step_bytes = 0

    def show(self, running) -> None:
        """Brings the bar up to date (opened once the task qualifies); under _lock."""
        share = 0.0
        if running is not None and running[6] > 0:
            share = min(running[4] / running[6], 1.0) * self.step_bytes
        n = min(self.done + int(share), self.total)
        elapsed = _now_s() - self.start
        if self.bar is None:
            projected = elapsed * self.total / n if n > 0 else 0.0
            if max(elapsed, projected) < _threshold_s:
                return
            self.bar = _new_bar(self.name, self.total, n)
            return
        self.bar.n = n
        self.bar.refresh()

    def end(self) -> None:
        with _lock:
            if self.bar is None and _enabled and _now_s() - self.start >= _threshold_s:
                self.bar = _new_bar(self.name, self.total)
            if self.bar is not None:
                _finish(self.bar, self.total)
                self.bar = None


class _Bars:
    """The bars on screen; every method runs under _lock."""

    def __init__(self):
        self.seen = _engine.last_call_seq()  # calls up to this one are dealt with
        self.bar = None  # the running call's bar
        self.bar_seq = 0
        self.task: _Task | None = None

    def update(self, running) -> None:
        """Deals with the calls that ended since the last update, then the running one."""
        if not _enabled:
            self.seen = _engine.last_call_seq()
            return
        for call in _engine.finished_calls(self.seen):
            self._ended(call)
        if self.task is not None:
            self.task.show(running)
            return
        if running is None or running[0] <= self.seen:
            return
        seq, op, start_ns, _, read, _, planned, nbytes, program = running
        # Projected from the blocks read (most bytes move as blocks are read, the pipeline
        # reading ahead of the compute); the total is exact once the call ends.
        total = max(int(_projected(nbytes, read, planned)), nbytes)
        if self.bar_seq != seq:
            if _expected_s(_now_s() - start_ns * 1e-9, read, planned) < _threshold_s:
                return
            self.close_all()
            self.bar = _new_bar(_label(op, program), total, nbytes)  # drawn as it opens
            self.bar_seq = seq
            return
        self.bar.total = total
        self.bar.n = nbytes
        self.bar.refresh()

    def _ended(self, call) -> None:
        seq, op, start_ns, end_ns, _, _, _, nbytes, program = call
        self.seen = max(self.seen, seq)
        if self.task is not None:
            return  # the task's bar shows it
        if self.bar is not None and self.bar_seq == seq:
            _finish(self.bar, nbytes)
            self.bar = None
        elif (end_ns - start_ns) * 1e-9 >= _threshold_s:
            # It ended between two polls before its bar opened: shown complete.
            _finish(_new_bar(_label(op, program), nbytes), nbytes)

    def close_all(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _label(op: str, program: int) -> str:
    return f"jit: {op}" if program else op


_BARS = _Bars()


@contextlib.contextmanager
def task(name: str, total: int) -> Iterator[_Task]:
    """One bar named `name` over `total` bytes for the engine calls made inside.

    Tasks do not nest: an inner one shares the outer one's bar.
    """
    with _lock:
        if _BARS.task is not None:
            outer = None
        else:
            _BARS.update(None)  # calls before the task get their own bars
            outer = _BARS.task = _Task(name, total)
    if outer is None:
        yield _Task(name, total)  # its steps go nowhere: the outer task's bar counts
        return
    try:
        yield outer
    finally:
        with _lock:
            _BARS.update(None)
            _BARS.task = None
        outer.end()


_stopping = False


def _poll_forever() -> None:
    while not _stopping:
        idle = _BARS.bar is None and _BARS.task is None
        running = _engine.wait_for_call(1.0 if idle else 0.0)
        with _lock:
            _BARS.update(running)
        if (running is not None or not idle) and not _stopping:
            time.sleep(_POLL_S)


def _ensure_poller() -> None:
    global _poller
    with _lock:
        if _poller is None or not _poller.is_alive():
            _poller = threading.Thread(target=_poll_forever, name="jask-progress", daemon=True)
            _poller.start()


@atexit.register
def _stop_poller() -> None:
    # A daemon thread waiting in the engine without the GIL when the interpreter
    # finalizes would be killed mid-C++ frame (std::terminate): it is stopped first.
    global _stopping
    _stopping = True
    _engine.release_call_waiters()
    if _poller is not None:
        _poller.join(timeout=5)
    _flush()  # a call that ended since the last poll: its bar closes at 100%, not where it was


def _flush() -> None:
    """Deals with every call that has ended (tests call it after an op, for bars that
    do not depend on the poller's timing)."""
    with _lock:
        _BARS.update(None)


def _after_fork() -> None:
    # The child has none of the parent's threads, nor its bars.
    global _poller, _lock, _BARS
    _lock = threading.RLock()
    _poller = None
    _BARS = _Bars()
    if _enabled:
        _ensure_poller()


os.register_at_fork(after_in_child=_after_fork)
if _enabled:
    _ensure_poller()
