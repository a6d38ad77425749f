"""What the benchmark ran on: CPU, memory, the data folder's disk and file system, software versions."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from importlib import metadata

import numpy as np

RAM_FILESYSTEMS = {"tmpfs", "ramfs"}
PACKAGES = ("jask", "jax", "jaxlib", "optax", "numpy", "dask", "matplotlib")


def filesystem(path: str) -> dict:
    """The mount holding `path`: its device, mount point and file-system type (from /proc/mounts)."""
    path = os.path.realpath(path)
    best = {"device": "?", "mount": "/", "type": "?"}
    with open("/proc/mounts") as mounts:
        for line in mounts:
            device, mount, fstype = line.split()[:3]
            inside = path == mount or path.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best["mount"]):
                best = {"device": device, "mount": mount, "type": fstype}
    return best


def _meminfo(field: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def ram_bytes() -> int:
    return _meminfo("MemTotal")


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _disk_model(device: str) -> str:
    """The block device's model, or its kind when it reports none (virtio disks do not)."""
    name = os.path.basename(device)
    for block in (name, name.rstrip("0123456789"), name.rsplit("p", 1)[0]):
        if os.path.exists(f"/sys/block/{block}/device/model"):
            return open(f"/sys/block/{block}/device/model").read().strip()
        if os.path.exists(f"/sys/block/{block}"):
            return "virtio disk" if block.startswith("vd") else "block device"
    return "unknown device"


def _versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def describe(data_dir: str) -> dict:
    """The facts BENCHMARKS.md reports about this machine and this checkout."""
    fs = filesystem(data_dir)
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_bytes": ram_bytes(),
        "data_dir": os.path.abspath(data_dir),
        "filesystem": fs["type"],
        "device": f"{fs['device']}, {_disk_model(fs['device'])}, mounted on {fs['mount']}",
        "kernel": platform.release(),
        "load_average": os.getloadavg()[0],
        "versions": _versions(),
        "commit": _git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def matmul_flops(side: int, repeat: int = 3) -> float:
    """Best in-memory float32 matmul rate (flop/s) of NumPy's BLAS on `side` x `side` operands."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((side, side), np.float32)
    b = rng.standard_normal((side, side), np.float32)
    a @ b
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * side**3 / best
