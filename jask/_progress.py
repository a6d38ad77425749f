"""Progress bars for long engine calls, save_tree / load_tree and conversions.

The engine counts the running call's blocks and bytes (src/engine/exec/stats.hpp) as it
runs; a daemon thread here waits in the engine (without the GIL) until a call starts,
then polls those counters every `_POLL_S` seconds while it runs, and shows a tqdm bar
on stderr for a call that has run for `_threshold_s` or whose projected time (its
blocks planned at the rate of the blocks done) exceeds it. Nothing runs in the engine's
per-block loop besides the counters it keeps anyway.

A run of a jitted program gets one bar for all its engine calls, named "jit: <its first
op>": the engine groups the calls of one run (XLA's run id) and tells what the program's
last run did (exec/stats.hpp's ProgramRunProgress). The bar counts bytes against the last
run's where there was one, otherwise calls against the calls XLA compiled (unknown for a
first run with loops or branches: such a run ends when another call starts, or once it has
been idle `_RUN_IDLE_S`). A Python operation made of many engine calls (save_tree,
load_tree) opens a `task`: one bar for all of it, counting the bytes of the leaves done.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np

from . import _engine

T = TypeVar("T")

# How often a running call's bar is brought up to date.
_POLL_S = 0.2
# Seconds a program run whose end the engine cannot tell (no count of its calls yet) may go
# without an engine call before its bar is closed: XLA computes in memory between calls.
_RUN_IDLE_S = 1.0
# Seconds a call (or a task) runs, or is projected to run, before it gets a bar.
# Private knob: the tests set it to 0.
_threshold_s = 2.0
_enabled = os.environ.get("JASK_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")

# Held while the bars change (by the poller thread, a task's thread, or _flush).
_lock = threading.RLock()
_poller: threading.Thread | None = None
# While above 0 the poller leaves the bars alone and only _flush() draws them (the tests:
# a bar then cannot depend on when the poller thread happens to run). Changed under _lock.
_poller_pauses = 0


def set_progress(enabled: bool) -> None:
    """Turns the progress bars on (the default) or off.

    Bars appear on stderr for engine calls, runs of jitted programs (one bar for all the
    engine calls of a run), `save_tree`, `load_tree` and conversions
    (`DiskArray.from_numpy`, saving, `materialize`) that run longer than about two seconds,
    or are projected to. They cost the engine nothing per
    block: a background thread reads the engine's counters five times a second while a
    call runs. The environment variable ``JASK_PROGRESS=0`` turns them off at import.

    Args:
      enabled: True to show bars, False to show none (an open bar is closed); anything
        else is a TypeError (a string such as "false" would otherwise turn them on).

    >>> import jask
    >>> jask.set_progress(False)
    >>> jask.progress_enabled()
    False
    >>> jask.set_progress(True)
    """
    global _enabled
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"set_progress takes True or False, got {enabled!r}")
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


def _new_bar(desc: str, total: int | None, done: int = 0, unit: str = "B"):
    """A bar of `total` bytes (or calls: `unit`; None: not known), `done` of them before it
    opened (left out of its rate)."""
    from tqdm import tqdm  # imported on the first bar: tqdm's import is not free

    return tqdm(
        total=None if total is None else max(int(total), int(done)),
        initial=int(done),
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        unit_divisor=1024,
        file=sys.stderr,
        leave=True,
        dynamic_ncols=True,
        mininterval=0,
    )


def _finish(bar, nbytes: int, failed: bool = False) -> None:
    """Ends `bar` at 100% with `nbytes` done; the bar of what `failed` where it got to,
    marked failed (never at 100%)."""
    if failed:
        bar.set_postfix_str("failed", refresh=False)
    else:
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
        """A part of the task worth `nbytes` of its total (done only if it ends normally)."""
        with _lock:
            self.step_bytes = int(nbytes)
        done = 0
        try:
            yield
            done = self.step_bytes
        finally:
            with _lock:
                self.done += done
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

    def end(self, failed: bool = False) -> None:
        """Ends the bar at its total, or where it got to if the task `failed`."""
        with _lock:
            if self.bar is None and _enabled and not failed:
                if _now_s() - self.start >= _threshold_s:
                    self.bar = _new_bar(self.name, self.total)
            if self.bar is not None:
                _finish(self.bar, self.total, failed)
                self.bar = None


class _Bars:
    """The bars on screen; every method runs under _lock."""

    def __init__(self):
        self.seen = _engine.last_call_seq()  # calls up to this one are dealt with
        self.bar = None  # the running eager call's bar
        self.bar_seq = 0
        self.runs_seen = _last_run_seq()  # program runs up to this one are dealt with
        self.run_bar = None  # the program run's bar
        self.run_bar_seq = 0
        self.run_bar_bytes = False  # the run's bar counts bytes (else calls)
        self.task: _Task | None = None

    def update(self, running, idle_s: float | None = _RUN_IDLE_S) -> None:
        """Deals with the calls and program runs that ended since the last update, then the
        running ones; a program run idle for `idle_s` (None: at all) ends."""
        if not _enabled:
            self.seen, self.runs_seen = _engine.last_call_seq(), _last_run_seq()
            return
        run = _engine.program_run()
        if run is not None and idle_s is not None and _idle(run, idle_s):
            _engine.end_program_run(run["seq"])
            run = None
        for call in _engine.finished_calls(self.seen):
            self._ended(call)
        for ended in _engine.finished_program_runs(self.runs_seen):
            self._run_ended(ended)
        if self.task is not None:
            self.task.show(running)
            return
        if run is not None and run["seq"] > self.runs_seen:
            self._show_run(run, running)
        if running is None or running[0] <= self.seen or running[8]:
            return
        seq, op, start_ns, _, read, _, planned, nbytes, program, _ = running
        # Projected from the blocks read (most bytes move as blocks are read, the pipeline
        # reading ahead of the compute); the total is exact once the call ends.
        total = max(int(_projected(nbytes, read, planned)), nbytes)
        if self.bar_seq != seq:
            if _expected_s(_now_s() - start_ns * 1e-9, read, planned) < _threshold_s:
                return
            self.close_all()
            self.bar = _new_bar(op, total, nbytes)  # drawn as it opens
            self.bar_seq = seq
            return
        self.bar.total = total
        self.bar.n = nbytes
        self.bar.refresh()

    def _ended(self, call) -> None:
        seq, op, start_ns, end_ns, _, _, _, nbytes, program, failed = call
        self.seen = max(self.seen, seq)
        if self.task is not None or program:
            return  # the task's bar, or its program run's, shows it
        if self.bar is not None and self.bar_seq == seq:
            _finish(self.bar, nbytes, failed)
            self.bar = None
        elif not failed and (end_ns - start_ns) * 1e-9 >= _threshold_s:
            # It ended between two polls before its bar opened: shown complete.
            _finish(_new_bar(op, nbytes), nbytes)

    def _show_run(self, run: dict, running) -> None:
        """Opens the program run's bar once it qualifies, or brings it up to date."""
        if self.run_bar_seq != run["seq"]:
            if _run_expected_s(run, running) < _threshold_s:
                return
            self.close_all()
            self.run_bar_bytes = run["expected_bytes"] > 0
            if self.run_bar_bytes:
                self.run_bar = _new_bar(_run_label(run), run["expected_bytes"], run["bytes"])
            else:
                total = run["expected_calls"] or None
                self.run_bar = _new_bar(_run_label(run), total, run["calls_done"], "call")
            self.run_bar_seq = run["seq"]
        elif self.run_bar_bytes:
            self.run_bar.total = max(self.run_bar.total, run["bytes"])
            self.run_bar.n = run["bytes"]
        else:
            calls = run["calls_done"] + _running_share(run, running)
            if self.run_bar.total is not None:
                self.run_bar.total = max(self.run_bar.total, run["calls_done"])
            self.run_bar.n = round(calls, 2)
        self.run_bar.set_postfix_str(run["op"], refresh=True)

    def _run_ended(self, run: dict) -> None:
        self.runs_seen = max(self.runs_seen, run["seq"])
        if self.task is not None:
            return
        if self.run_bar is not None and self.run_bar_seq == run["seq"]:
            done = run["bytes"] if self.run_bar_bytes else run["calls_done"]
            _finish(self.run_bar, done, run["failed"])
            self.run_bar = None
        elif not run["failed"] and (run["end_ns"] - run["start_ns"]) * 1e-9 >= _threshold_s:
            # It ended between two polls before its bar opened: shown complete.
            _finish(_new_bar(_run_label(run), run["bytes"]), run["bytes"])

    def close_all(self) -> None:
        for name in ("bar", "run_bar"):
            if getattr(self, name) is not None:
                getattr(self, name).close()
                setattr(self, name, None)


def _last_run_seq() -> int:
    """The seq of the last program run started (0: none)."""
    run = _engine.program_run()
    if run is not None:
        return run["seq"]
    return max((r["seq"] for r in _engine.finished_program_runs(0)), default=0)


def _idle(run: dict, idle_s: float) -> bool:
    """Whether a program run has gone `idle_s` without a call running: one whose calls are
    counted (it ends at its last) only at idle_s 0."""
    if run["call_running"] or (run["expected_calls"] and idle_s > 0):
        return False
    last = max(run["last_call_end_ns"], run["start_ns"])
    return _now_s() - last * 1e-9 >= idle_s


def _run_expected_s(run: dict, running) -> float:
    """How long a program run takes: its program's last run, as far as it is known; else its
    calls so far projected over its expected calls, or its running call's projection."""
    now = _now_s()
    elapsed = now - run["start_ns"] * 1e-9
    expected = max(elapsed, run["expected_ns"] * 1e-9)
    if run["expected_calls"] and run["calls_done"]:
        expected = max(expected, _expected_s(elapsed, run["calls_done"], run["expected_calls"]))
    if running is not None and running[8] == run["program"]:
        started = running[2] * 1e-9
        call_s = _expected_s(now - started, running[4], running[6])
        expected = max(expected, started - run["start_ns"] * 1e-9 + call_s)
    return expected


def _running_share(run: dict, running) -> float:
    """The share of the program run's running call done (its blocks read of those planned)."""
    if not run["call_running"] or running is None or running[8] != run["program"]:
        return 0.0
    return min(running[4] / running[6], 1.0) if running[6] > 0 else 0.0


def _run_label(run: dict) -> str:
    return f"jit: {run['op']}"


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
    failed = True
    try:
        yield outer
        failed = False
    finally:
        with _lock:
            _BARS.update(None)
            _BARS.task = None
        outer.end(failed)


def settle() -> None:
    """Ends the bar of an engine call that has just ended on this thread, before the call
    returns to the user: the poller would end it up to `_POLL_S` later, after whatever the
    user prints next. Costs nothing when no bar is open."""
    if _BARS.bar is None:
        return
    with _lock:
        _BARS.update(None)


def settled(entry: Callable[..., T]) -> Callable[..., T]:
    """`entry`, an engine call, followed by `settle()` however it ends."""

    @functools.wraps(entry)
    def call(*args, **kwargs) -> T:
        try:
            return entry(*args, **kwargs)
        finally:
            settle()

    return call


_stopping = False


def _poll_forever() -> None:
    while not _stopping:
        idle = _BARS.bar is None and _BARS.run_bar is None and _BARS.task is None
        running = _engine.wait_for_call(1.0 if idle else 0.0)
        with _lock:
            if not _poller_pauses:
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
    """Deals with every call that has ended, and ends a program run with no call running
    whose end the engine cannot tell (tests call it after an op, for bars that do not
    depend on the poller's timing)."""
    with _lock:
        _BARS.update(None, idle_s=0.0)


@contextlib.contextmanager
def _poller_paused() -> Iterator[None]:
    """The poller draws nothing inside (it has drawn its last when this enters): the bars
    change only in _flush(), task() and the calls made here."""
    global _poller_pauses
    with _lock:
        _poller_pauses += 1
    try:
        yield
    finally:
        with _lock:
            _poller_pauses -= 1


def _after_fork() -> None:
    # The child has none of the parent's threads, nor its bars.
    global _poller, _lock, _BARS, _poller_pauses
    _lock = threading.RLock()
    _poller = None
    _poller_pauses = 0
    _BARS = _Bars()
    if _enabled:
        _ensure_poller()


os.register_at_fork(after_in_child=_after_fork)
if _enabled:
    _ensure_poller()
