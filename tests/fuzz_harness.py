"""Runs hostile-file trials in sandboxed children and checks Jask's promise on each one.

A trial is a folder of files (bytes, FIFOs, symbolic links, folders), a piece of code that opens
and reads it with Jask, and optionally the same with the format's reference library. The pieces
of code run in children forked from one server process (JAX and the libraries imported once),
TRIALS_PER_CHILD one after another in each child, with an address-space and a file-size limit
and a per-trial timeout; a crash or hang ends its child, the next trials run in a new one. A
trial that fails in company runs once more, alone, in a fresh copy of its folder and with four
times the time, and only that run counts. For every trial `check_trials` asserts:

- the Jask child neither crashed nor hung;
- it either refused the file cleanly, with a ValueError, TypeError or OSError (or a subclass;
  a MemoryError only where it is Jask's budget refusing, naming the budget) whose message names
  the trial's folder or one of its files, or it returned values;
- values returned equal the reference's, in dtype, shape and value (NaNs where the reference has
  them), in the reference's dtype or in that dtype canonicalized as `jnp.asarray` would
  (float64 is float32 while x64 is off); and where the reference refuses the file, Jask refuses
  it too, unless the trial says that Jask may accept it (`jask_may_accept`);
- a read-only trial left every byte, name and link in its folder as it was;
- nothing outside the trial's folder changed (a sibling folder of canary files is hashed around
  every trial), Jask's own scratch folder aside.

Code is a string run with `exec`. It sees `P` (the trial folder's absolute path, a str), `np`,
`jask`, `os` and whatever the server preloaded, and sets `out`: an array (a DiskArray is read
whole with numpy.asarray), or a dict / list / tuple of them, nested.

How many trials a fuzzer runs: `fuzz_trials(default)` is `default` (make test: half of it, by
JASK_FUZZ_SCALE), or JASK_FUZZ_TRIALS when set (`make fuzz` sets thousands);
`fuzz_sample(trials, default, seed)` is a fixed, seeded sample of a list of structured trials
(the same one every run), all of them under `make fuzz`.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import pickle
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path


class _Fifo:
    def __repr__(self):
        return "FIFO"


class _Dir:
    def __repr__(self):
        return "DIR"


FIFO = _Fifo()  # a named pipe: opening it for reading blocks until a writer comes
DIR = _Dir()  # an empty folder


@dataclasses.dataclass(frozen=True)
class Symlink:
    target: str  # as os.symlink takes it: absolute, or relative to the link's folder


@dataclasses.dataclass
class Trial:
    name: str
    files: dict  # path relative to the trial folder -> bytes | FIFO | DIR | Symlink
    jask: str  # code setting `out`
    reference: str | None = None  # code setting `out`, or None: no value check
    read_only: bool = True  # the trial's folder must be unchanged afterwards
    jask_may_accept: bool = False  # Jask may return values where the reference refuses


def fuzz_trials(default: int) -> int:
    """`default`, or the JASK_FUZZ_TRIALS environment variable's value when it is set; times
    JASK_FUZZ_SCALE when that is set (make test: half of each default, for its 20 minutes)."""
    value = os.environ.get("JASK_FUZZ_TRIALS")
    if value:
        return int(value)
    scale = float(os.environ.get("JASK_FUZZ_SCALE") or 1)
    return max(1, round(default * scale))


def fuzz_sample(trials: list, default: int, seed: int) -> list:
    """A seeded sample of `default` of the trials (JASK_FUZZ_TRIALS of them when set), in their
    order; all of them when there are no more. make test runs the sample, make fuzz them all."""
    count = min(len(trials), fuzz_trials(default))
    keep = set(random.Random(seed).sample(range(len(trials)), count))
    return [t for i, t in enumerate(trials) if i in keep]


ALLOWED = (ValueError, TypeError, OSError)

# The child's limits: address space beyond what the server had mapped when it forked, bytes any
# one file may be written to, seconds per trial.
ADDRESS_SPACE_HEADROOM = 3 << 30
FILE_SIZE_LIMIT = 256 << 20
TRIAL_TIMEOUT_S = 30
# Trials one child runs, one after another; a trial that fails in company runs again alone
# (`check_trials`). 1: a measured run with 16 took twice the CPU time of 1 (log.md), the trials'
# x64 switches and what earlier trials leave likely costing more than a child's start.
TRIALS_PER_CHILD = 1


# --- the server: runs in a subprocess, forks a child per batch of pieces of code ---------------

SERVER = r"""
import gc, os, pickle, resource, select, signal, sys, time, traceback
import numpy as np
import jax
import jask

ADDRESS_SPACE_HEADROOM, FILE_SIZE_LIMIT, TRIAL_TIMEOUT_S, TRIALS_PER_CHILD = {limits}
for module in {preload!r}:
    __import__(module)
jask.set_memory_budget({budget!r}, scratch_dir={scratch!r})
# No JAX computation here: a child forked from a process whose XLA client runs (its threads do not
# survive the fork) hangs at its first JAX op; a client the child starts itself works.


def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def leaves(out, prefix=""):
    if isinstance(out, dict):
        for k in out:
            yield from leaves(out[k], f"{{prefix}}/{{k}}")
    elif isinstance(out, (list, tuple)):
        for i, v in enumerate(out):
            yield from leaves(v, f"{{prefix}}/{{i}}")
    else:
        yield prefix, np.asarray(out)


def child(batch, fd):
    # A scratch root of the child's own: a forked child keeps writing into its parent's scratch
    # folder, whose file names its siblings take too (log.md, known gaps).
    jask.set_memory_budget({budget!r}, scratch_dir=os.path.join({scratch!r}, str(os.getpid())))
    headroom = vm_bytes() + ADDRESS_SPACE_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (headroom, headroom))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    x64 = jax.config.jax_enable_x64
    with os.fdopen(fd, "wb") as f:
        for code, P in batch:
            jax.config.update("jax_enable_x64", x64)  # as the server had it, whatever came before
            try:
                scope = {{"P": P, "np": np, "jask": jask, "os": os, "jax": jax}}
                exec(code, scope)
                result = ("values", dict(leaves(scope["out"])))
            except BaseException as e:
                tb = traceback.format_exc(limit=-6)
                result = ("error", [c.__name__ for c in type(e).__mro__], str(e), tb)
            scope = e = None
            gc.collect()  # the trial's arrays closed before the next trial
            try:
                data = pickle.dumps(result)
            except BaseException as e:
                data = pickle.dumps(("error", ["PicklingError"], repr(e), ""))
            f.write(len(data).to_bytes(8, "little") + data)
            f.flush()
    os._exit(0)


# Runs `batch` in one child, trial after trial; returns the results of those it ran: all, or up
# to the one that crashed or hung (its result "crash" or "timeout") and no further.
def run(batch):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(batch, w)
    os.close(w)
    results, buf, deadline = [], b"", time.monotonic() + TRIAL_TIMEOUT_S
    with os.fdopen(r, "rb") as f:
        while len(results) < len(batch):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([f], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return results + [("timeout",)]
            chunk = os.read(f.fileno(), 1 << 20)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 8 and len(buf) >= 8 + int.from_bytes(buf[:8], "little"):
                n = int.from_bytes(buf[:8], "little")
                try:
                    results.append(pickle.loads(buf[8 : 8 + n]))
                except Exception as e:
                    results.append(("crash", f"an unreadable result: {{e!r}}"))
                buf = buf[8 + n :]
                deadline = time.monotonic() + TRIAL_TIMEOUT_S
        if len(results) < len(batch):
            try:
                os.kill(pid, signal.SIGKILL)  # it closed its end early: it is not to go on
            except ProcessLookupError:
                pass
    _, status = os.waitpid(pid, 0)
    if len(results) == len(batch):
        return results
    if os.WIFSIGNALED(status):
        return results + [("crash", signal.Signals(os.WTERMSIG(status)).name)]
    code = os.waitstatus_to_exitcode(status)
    return results + [("crash", f"exit status {{code}} and no result")]


jobs = pickle.load(open(sys.argv[1], "rb"))
results = []
while len(results) < len(jobs):
    results += run(jobs[len(results) : len(results) + TRIALS_PER_CHILD])
    with open(sys.argv[2], "wb") as f:
        pickle.dump(results, f)
"""


def run_jobs(
    jobs, work: Path, preload, budget, timeout_s: float | None = None, per_child: int | None = None
) -> list:
    """Runs (code, folder) jobs in one server, `per_child` of them (TRIALS_PER_CHILD unless
    given) one after another in each sandboxed child; returns their results: ("values", {leaf:
    array}), ("error", [exception type and bases], message, traceback), ("timeout",) or ("crash",
    why). A job that crashes or hangs ends its child; the jobs after it run in a new one. A job
    that failed in company may owe it to a job before it in its child: run it again alone
    (`per_child=1`) before calling it a failure. For trials `check_trials` cannot lay out (a file
    patched after the others exist); `check_trials` is the usual way in."""
    timeout_s = TRIAL_TIMEOUT_S if timeout_s is None else timeout_s
    per_child = TRIALS_PER_CHILD if per_child is None else per_child
    work.mkdir(parents=True, exist_ok=True)
    jobs_file, results_file = work / "jobs.pickle", work / "results.pickle"
    jobs_file.write_bytes(pickle.dumps(jobs))
    source = SERVER.format(
        limits=(ADDRESS_SPACE_HEADROOM, FILE_SIZE_LIMIT, timeout_s, per_child),
        preload=tuple(preload),
        budget=budget,
        scratch=str(work / "scratch"),
    )
    done = subprocess.run(
        [sys.executable, "-c", source, str(jobs_file), str(results_file)],
        capture_output=True,
        text=True,
        timeout=60 + timeout_s * 2 * len(jobs),
    )
    results = pickle.loads(results_file.read_bytes()) if results_file.exists() else []
    if done.returncode != 0 and len(results) < len(jobs):
        raise AssertionError(f"the fuzz server failed:\n{done.stderr[-4000:]}")
    return results


# --- folders and their snapshots ------------------------------------------------------------


def _lay_out(folder: Path, files: dict) -> None:
    folder.mkdir(parents=True)
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FIFO:
            os.mkfifo(path)
        elif content is DIR:
            path.mkdir(exist_ok=True)
        elif isinstance(content, Symlink):
            os.symlink(content.target, path)
        else:
            path.write_bytes(content)


def snapshot(folder: Path) -> dict:
    """Every entry under `folder`: its kind, and a file's bytes' hash or a link's target."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = ("dir",)
            elif path.is_file():
                seen[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mode)
            else:
                seen[rel] = ("special", st.st_mode)
    return seen


def _differences(before: dict, after: dict) -> list[str]:
    out = [f"removed {k}" for k in before.keys() - after.keys()]
    out += [f"created {k}" for k in after.keys() - before.keys()]
    out += [f"changed {k}" for k in before.keys() & after.keys() if before[k] != after[k]]
    return sorted(out)


CANARIES = {
    "victim.npy": b"\x93NUMPY canary: nothing may rename, write or remove this file",
    "victim.npy.part": b"canary",
    "notes.txt": b"a file of someone else's, beside the trials",
}


# --- checking -------------------------------------------------------------------------------


def _names_the_file(message: str, folder: Path, trial: Trial) -> bool:
    if str(folder) in message:
        return True
    return any(len(Path(rel).name) >= 3 and Path(rel).name in message for rel in trial.files)


def _same_values(actual: dict, expected: dict) -> str | None:
    """Why `actual` differs from `expected` (None if it does not)."""
    import jax
    import numpy as np

    if actual.keys() != expected.keys():
        return f"leaves {sorted(actual)} where the reference has {sorted(expected)}"
    for key in expected:
        a, e = actual[key], expected[key]
        # The reference's dtype, or what jnp.asarray makes of it (float64 is float32 with x64
        # off): the values are then the reference's in that dtype.
        if a.dtype != e.dtype and a.dtype == jax.dtypes.canonicalize_dtype(e.dtype):
            e = e.astype(a.dtype)
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"{key}: {a.dtype}{a.shape} where the reference has {e.dtype}{e.shape}"
        try:
            np.testing.assert_array_equal(a, e)
        except AssertionError as err:
            return f"{key}: values differ from the reference's: {str(err)[:600]}"
    return None


def _judge(trial: Trial, folder: Path, result, reference) -> str | None:
    """What went wrong in one trial (None if nothing)."""
    kind = result[0]
    if kind == "timeout":
        return f"hung (no result in {TRIAL_TIMEOUT_S} s, nor in {4 * TRIAL_TIMEOUT_S} s alone)"
    if kind == "crash":
        return f"crashed: {result[1]}"
    if kind == "error":
        mro, message, tb = result[1], result[2], result[3]
        allowed = any(c in mro for c in ("ValueError", "TypeError", "OSError"))
        budget = "MemoryError" in mro and "budget" in message
        if not (allowed or budget):
            return f"raised {mro[0]}, not a ValueError/TypeError/OSError: {message!r}\n{tb}"
        if not message.strip():
            return f"raised {mro[0]} with no message\n{tb}"
        if not _names_the_file(message, folder, trial):
            return f"raised {mro[0]} whose message names no file of the trial: {message!r}"
        return None
    if reference is None:
        return None
    if reference[0] != "values":
        if trial.jask_may_accept:
            return None
        what = reference[2] if reference[0] == "error" else reference[0]
        return f"returned values where the reference refuses the file ({what!r})"
    return _same_values(result[1], reference[1])


def outcome(result) -> str:
    """A trial's outcome in a word or two, for the fuzzers' counts."""
    if result[0] == "error":
        return f"refused: {result[1][0]}"
    return result[0]


def check_trials(
    trials: list[Trial],
    tmp_path: Path,
    *,
    preload: tuple[str, ...] = (),
    budget: str = "1MB",
) -> collections.Counter:
    """Runs every trial; raises AssertionError naming every trial that broke the promise.

    Args:
      trials: the trials.
      tmp_path: a folder of the test's own.
      preload: modules the server imports before forking (the reference libraries).
      budget: Jask's memory budget in the children.

    Returns:
      How many trials ended in each outcome ("values", "refused: ValueError", ...).
    """
    root = tmp_path / "fuzz"
    outside = root / "outside"
    _lay_out(outside, CANARIES)
    outside_before = snapshot(outside)
    ran = _run(trials, root / "trials", root / "work", preload, budget, None, TRIAL_TIMEOUT_S)
    problems = [_problem(*r) for r in ran]
    # A trial that failed in company (a child runs several, one after another) runs once more,
    # alone, in a fresh copy of its folder and with four times the time: its failure is its own
    # then, not an earlier trial's nor a minute of a loaded machine.
    again = [i for i, problem in enumerate(problems) if problem]
    if again:
        alone = _run(
            [trials[i] for i in again],
            root / "alone",
            root / "work_alone",
            preload,
            budget,
            1,
            4 * TRIAL_TIMEOUT_S,
        )
        passed = []
        for i, r in zip(again, alone):
            ran[i], problems[i] = r, _problem(*r)
            if not problems[i]:
                passed.append(trials[i].name)
        if passed:
            print(f"{len(passed)} trials failed in company and passed alone: {passed[:10]}")
    failures, counts = [], collections.Counter()
    for (trial, folder, result, *_), problem in zip(ran, problems):
        counts[outcome(result)] += 1
        if problem:
            failures.append(f"{trial.name} ({folder}): {problem}")
    changed = _differences(outside_before, snapshot(outside))
    if changed:
        failures.append(f"files outside every trial's folder changed: {changed}")
    if failures:
        shown = "\n".join(textwrap.shorten(f, 1500) if "\n" not in f else f for f in failures[:20])
        raise AssertionError(f"{len(failures)} of {len(trials)} trials failed:\n{shown}")
    shutil.rmtree(root / "trials", ignore_errors=True)
    shutil.rmtree(root / "alone", ignore_errors=True)
    return counts


def _run(trials, where: Path, work: Path, preload, budget, per_child, timeout_s) -> list:
    """Lays out and runs `trials`; returns (trial, folder, result, reference, snapshot before)
    for each."""
    folders = []
    for i, trial in enumerate(trials):
        folders.append(where / f"t{i:05d}")
        _lay_out(folders[-1], trial.files)
    befores = [snapshot(f) for f in folders]
    jobs = [(t.jask, str(f)) for t, f in zip(trials, folders)]
    jobs += [(t.reference, str(f)) for t, f in zip(trials, folders) if t.reference is not None]
    results = run_jobs(jobs, work, preload, budget, timeout_s, per_child)
    results += [("timeout",)] * (len(jobs) - len(results))
    references = iter(results[len(trials) :])
    return [
        (t, f, results[i], next(references) if t.reference is not None else None, befores[i])
        for i, (t, f) in enumerate(zip(trials, folders))
    ]


def _problem(trial: Trial, folder: Path, result, reference, before) -> str | None:
    """What went wrong in one trial, its folder's changes included (None if nothing)."""
    problem = _judge(trial, folder, result, reference)
    if trial.read_only:
        changed = _differences(before, snapshot(folder))
        if changed:
            problem = (problem + "; " if problem else "") + f"changed its input: {changed}"
    return problem
