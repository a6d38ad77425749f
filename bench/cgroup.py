"""A fresh memory-capped cgroup to run one child process in (cgroup v2, else v1).

The benchmark runs each capped contender in one (`python -m bench --cap`), and the
memory tests run their capped children in one (tests/test_zero_materialization.py).

The child enters the cgroup through a tiny shell wrapper that writes its own
pid into `cgroup.procs` and then execs the real command, so the parent never
forks inside a multi-threaded (JAX) process with a pre-exec hook.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

_counter = itertools.count()


class CgroupUnavailable(RuntimeError):
    """No writable memory cgroup on this machine; the message says why."""


@dataclass(frozen=True)
class MemoryCgroup:
    """A cgroup with a hard memory limit, `version` 1 or 2."""

    path: Path
    version: int
    limit: int

    def command(self, argv: list[str]) -> list[str]:
        """`argv` wrapped so that the process enters this cgroup before it execs."""
        return [
            "/bin/sh",
            "-c",
            'echo $$ > "$0" && exec "$@"',
            str(self.path / "cgroup.procs"),
            *argv,
        ]

    def peak_bytes(self) -> int | None:
        """The most memory the cgroup was charged for, or None where the kernel does not say."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding this cgroup's limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Deletes the cgroup; its processes must have exited."""
        # A killed child may still be leaving the cgroup for a moment after it is reaped.
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        self.path.rmdir()


def _mounts(fs_type: str) -> list[tuple[Path, set[str]]]:
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount_point, kind, options, *_ = line.split()
        if kind == fs_type:
            found.append((Path(mount_point), set(options.split(","))))
    return found


def _own_cgroup(controller: str | None) -> str:
    """This process's cgroup path: for a v1 `controller`, or the v2 one when None."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller is None and controllers == "":
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return "/"


def _candidates(mount: Path, own: str) -> list[Path]:
    # A child of our own cgroup first (its limit then also counts the
    # hierarchy above), the mount root as the fallback.
    own_dir = mount / own.lstrip("/")
    return [own_dir] if own_dir == mount else [own_dir, mount]


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _make_v2(limit: int, prefix: str) -> MemoryCgroup:
    reasons = []
    for mount, _ in _mounts("cgroup2"):
        for parent in _candidates(mount, _own_cgroup(None)):
            try:
                if "memory" not in (parent / "cgroup.controllers").read_text().split():
                    reasons.append(f"{parent}: memory controller not available")
                    continue
                if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    _write(parent / "cgroup.subtree_control", "+memory")
                path = parent / f"{prefix}-{os.getpid()}-{next(_counter)}"
                path.mkdir()
                try:
                    _write(path / "memory.max", str(limit))
                    if (path / "memory.swap.max").exists():
                        _write(path / "memory.swap.max", "0")
                except OSError:
                    path.rmdir()
                    raise
                return MemoryCgroup(path, 2, limit)
            except OSError as e:
                reasons.append(f"{parent}: {e}")
    raise CgroupUnavailable("cgroup v2: " + ("; ".join(reasons) or "no cgroup2 mount"))


def _make_v1(limit: int, prefix: str) -> MemoryCgroup:
    reasons = []
    for mount, options in _mounts("cgroup"):
        if "memory" not in options:
            continue
        for parent in _candidates(mount, _own_cgroup("memory")):
            try:
                path = parent / f"{prefix}-{os.getpid()}-{next(_counter)}"
                path.mkdir()
                try:
                    _write(path / "memory.limit_in_bytes", str(limit))
                    # memory+swap: without it the child could page out instead of being capped.
                    if (path / "memory.memsw.limit_in_bytes").exists():
                        _write(path / "memory.memsw.limit_in_bytes", str(limit))
                except OSError:
                    path.rmdir()
                    raise
                return MemoryCgroup(path, 1, limit)
            except OSError as e:
                reasons.append(f"{parent}: {e}")
    raise CgroupUnavailable("cgroup v1: " + ("; ".join(reasons) or "no memory controller mount"))


def create_memory_cgroup(limit: int, prefix: str = "jask-test") -> MemoryCgroup:
    """A fresh cgroup capped at `limit` bytes, named `prefix`-pid-n; call its `remove()` when done.

    Raises:
      CgroupUnavailable: neither cgroup v2 nor v1 lets this process make one.
    """
    try:
        return _make_v2(limit, prefix)
    except CgroupUnavailable as v2:
        try:
            return _make_v1(limit, prefix)
        except CgroupUnavailable as v1:
            raise CgroupUnavailable(f"no writable memory cgroup ({v2}; {v1})") from None
