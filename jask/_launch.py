"""python -m jask.launch: N processes of one script on this host, joined by jax.distributed.

    python -m jask.launch -n 4 train.py --steps 10
    python -m jask.launch -n 2 -m mypackage.train

Each process gets JASK_COORDINATOR (a free local port, or --coordinator), JASK_NUM_PROCESSES
and JASK_PROCESS_ID, which `jask.distributed.initialize()` reads; its output lines come back
prefixed with its rank. When a process fails (a non-zero exit or a signal), the others get
--grace-s seconds to stop on their own, then SIGTERM, then SIGKILL KILL_AFTER_TERM_S seconds
later; the launcher exits with the first failing process's code (128 + N for signal N) after
naming its rank. For several hosts run one launcher per host with the same --coordinator and
--num-processes, each with its own --first-rank.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from ._api.distributed import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID

GRACE_S = 5.0  # survivors of a failure get this long to exit on their own
KILL_AFTER_TERM_S = 5.0  # then SIGTERM; SIGKILL this long after it
_POLL_S = 0.05


@dataclass
class _Worker:
    rank: int
    process: subprocess.Popen
    pumps: list[threading.Thread] = field(default_factory=list)

    def exit_code(self) -> int | None:
        code = self.process.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code  # -N: killed by signal N, as a shell says


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(stream, out, prefix: str, lock: threading.Lock) -> None:
    """Copies `stream`'s lines to `out`, each prefixed, whole lines at a time."""
    for line in iter(stream.readline, b""):
        text = line.decode(errors="replace")
        with lock:
            out.write(prefix + text if text.endswith("\n") else prefix + text + "\n")
            out.flush()
    stream.close()


def _start(command: list[str], ranks: range, world: int, coordinator: str) -> list[_Worker]:
    lock = threading.Lock()
    workers = []
    width = len(str(world - 1))
    for rank in ranks:
        env = dict(os.environ)
        env.update(
            {
                ENV_COORDINATOR: coordinator,
                ENV_NUM_PROCESSES: str(world),
                ENV_PROCESS_ID: str(rank),
                "PYTHONUNBUFFERED": "1",
            }
        )
        process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: stopping it stops its children
        )
        worker = _Worker(rank, process)
        prefix = f"[{rank:>{width}}] "
        for stream, out in ((process.stdout, sys.stdout), (process.stderr, sys.stderr)):
            pump = threading.Thread(target=_pump, args=(stream, out, prefix, lock), daemon=True)
            pump.start()
            worker.pumps.append(pump)
        workers.append(worker)
    return workers


def _signal_group(worker: _Worker, signum: int) -> None:
    try:
        os.killpg(worker.process.pid, signum)
    except ProcessLookupError:
        pass


def _stop(workers: list[_Worker], grace_s: float) -> None:
    """Waits up to grace_s for the workers to exit, then terminates, then kills them."""
    for wait_s, signum in ((grace_s, signal.SIGTERM), (KILL_AFTER_TERM_S, signal.SIGKILL)):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(w.exit_code() is None for w in workers):
            time.sleep(_POLL_S)
        for w in workers:
            if w.exit_code() is None:
                _signal_group(w, signum)
    for w in workers:
        w.process.wait()


def _describe(code: int) -> str:
    if code > 128 and code - 128 in signal.valid_signals():
        return f"was killed by {signal.Signals(code - 128).name} (exit code {code})"
    return f"exited with code {code}"


def run(
    command: list[str],
    num_local: int,
    *,
    coordinator: str | None = None,
    num_processes: int | None = None,
    first_rank: int = 0,
    grace_s: float = GRACE_S,
) -> int:
    """Runs `command` as ranks first_rank .. first_rank + num_local - 1 of a run of
    `num_processes` (default num_local) processes; returns the exit code described above."""
    world = num_local if num_processes is None else num_processes
    if num_local < 1 or first_rank < 0 or first_rank + num_local > world:
        raise ValueError(
            f"jask.launch: ranks {first_rank}..{first_rank + num_local - 1} do not fit a run "
            f"of {world} processes"
        )
    if coordinator is None:
        if world != num_local:
            raise ValueError("jask.launch: a run over several hosts needs --coordinator host:port")
        coordinator = f"127.0.0.1:{_free_port()}"
    workers = _start(command, range(first_rank, first_rank + num_local), world, coordinator)
    interrupted = []

    def forward(signum, frame):
        interrupted.append(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        failure = None
        while failure is None and not interrupted:
            codes = [(w, w.exit_code()) for w in workers]
            if all(code is not None for _, code in codes):
                break
            failure = next(((w, c) for w, c in codes if c not in (None, 0)), None)
            if failure is None:
                time.sleep(_POLL_S)
        if interrupted:
            print("jask.launch: interrupted; stopping every process", file=sys.stderr, flush=True)
            for w in workers:
                _signal_group(w, signal.SIGTERM)
            _stop(workers, 0.0)
            return 128 + interrupted[0]
        if failure is not None:
            failed, code = failure
            alive = [w.rank for w in workers if w.exit_code() is None]
            print(
                f"jask.launch: rank {failed.rank} {_describe(code)}; stopping ranks {alive} "
                f"(within {grace_s + KILL_AFTER_TERM_S:g} s)",
                file=sys.stderr,
                flush=True,
            )
            _stop(workers, grace_s)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for w in workers:
            for pump in w.pumps:
                pump.join()
    if failure is None:
        return 0
    failed, code = failure
    others = "; ".join(
        f"rank {w.rank} {_describe(w.exit_code())}" for w in workers if w is not failed
    )
    print(
        f"jask.launch: failed: rank {failed.rank} {_describe(code)} (the first process to "
        f"fail); then {others}",
        file=sys.stderr,
        flush=True,
    )
    return code


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jask.launch",
        description="Runs a script as N processes of one jax.distributed run (jask.distributed).",
    )
    p.add_argument("-n", "--nproc", type=int, required=True, help="processes on this host")
    p.add_argument("--coordinator", help="host:port of process 0 (default: a free local port)")
    p.add_argument("--num-processes", type=int, help="processes on all hosts (default: -n)")
    p.add_argument("--first-rank", type=int, default=0, help="rank of this host's first process")
    p.add_argument(
        "--grace-s",
        type=float,
        default=GRACE_S,
        help=f"after a failure, seconds the others get to exit before SIGTERM (default {GRACE_S:g})",
    )
    p.add_argument("program", nargs="?", help="script.py [args] or -m module [args]")
    return p


_TAKES_VALUE = {"-n", "--nproc", "--coordinator", "--num-processes", "--first-rank", "--grace-s"}


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """The launcher's own options, and the program: [script, args...] or [-m, module, args...].

    Everything after the script or the module is the program's, options included."""
    i = 0
    while i < len(argv):
        if argv[i] == "-m":
            return argv[:i], argv[i:]
        if argv[i] in _TAKES_VALUE:
            i += 2
        elif argv[i].startswith("-"):
            i += 1
        else:
            return argv[:i], argv[i:]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    own, program = _split(sys.argv[1:] if argv is None else argv)
    options = _parser().parse_args(own)
    if not program or program == ["-m"]:
        _parser().error("give a script or -m module, then its arguments")
    try:
        return run(
            [sys.executable, *program],
            options.nproc,
            coordinator=options.coordinator,
            num_processes=options.num_processes,
            first_rank=options.first_rank,
            grace_s=options.grace_s,
        )
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
