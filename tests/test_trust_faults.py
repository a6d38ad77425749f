"""A file system that fails under Jask: EIO from ext4's shutdown ioctl (issue 12).

A child process works on a small ext4 image of its own (mounted on a loop device; skipped with
the reason where that is not permitted), then shuts the file system down with FS_IOC_SHUTDOWN,
after which every read and write on it fails with EIO. Every Jask call must then raise OSError
naming the file, never crash or hang, and the process must still exit. Remounted, the file the
child was updating holds its last committed values, all of them.
"""

import json
import subprocess

import numpy as np
import pytest
from test_scratch import run_python

ROWS, COLS = 512, 256


@pytest.fixture
def ext4_image(tmp_path):
    """A 32 MiB ext4 file system on a loop device, mounted at tmp_path/mnt."""
    image, mount_point = tmp_path / "fs.img", tmp_path / "mnt"
    mount_point.mkdir()
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 image here: {made.stderr.strip() or made.stdout}")
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {mounted.stderr.strip()}")
    try:
        yield image, mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True)


FAILING_DISK = """
    import fcntl, json, os, struct, sys
    import jax, jax.numpy as jnp, numpy as np, jask

    mount_point = sys.argv[1]
    jask.set_memory_budget("256KB", scratch_dir=os.path.join(mount_point, "scratch"))
    path = os.path.join(mount_point, "x.npy")
    x = jask.DiskArray.open(path, mode="r+")
    x.update_(x + 1.0)  # committed: the file now holds 1 + its first values
    y = x * 2.0  # a scratch array on the same file system
    total = jax.jit(jnp.sum)

    FS_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
    fd = os.open(mount_point, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_SHUTDOWN, struct.pack("I", 2))  # EXT4_GOING_FLAGS_NOLOGFLUSH
    except OSError as e:
        print(json.dumps({"skip": f"FS_IOC_SHUTDOWN refused: {e}"}))
        sys.exit(0)
    finally:
        os.close(fd)

    attempts = {
        "eager sum": lambda: float(jnp.sum(x)),
        "jitted sum": lambda: float(total(x)),
        "read into memory": lambda: np.asarray(y),
        "new scratch array": lambda: x - 1.0,
        "update_": lambda: x.update_(y),
        "save": lambda: y.save(os.path.join(mount_point, "y.npy")),
        "open": lambda: jask.DiskArray.open(path),
    }
    results = {}
    for name, attempt in attempts.items():
        try:
            attempt()
            results[name] = "no error"
        except Exception as e:  # noqa: BLE001 - the test checks which
            results[name] = [type(e).__name__, str(e)]
    print(json.dumps({"results": results}), flush=True)
"""


def test_eio_from_a_shut_down_file_system_is_an_os_error_and_the_file_survives(ext4_image):
    image, mount_point = ext4_image
    start = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7
    np.save(mount_point / "x.npy", start)
    subprocess.run(["sync"], check=True)
    child = run_python(FAILING_DISK, mount_point, mount_point, check=False)
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the child printed nothing (exit {child.returncode})\n{child.stderr[-3000:]}"
    report = json.loads(lines[-1])
    if "skip" in report:
        pytest.skip(report["skip"])
    # no crash: the child ran every attempt and exited by itself (its exit cleanup may fail
    # to remove its scratch folder on the dead file system, but must not kill it)
    assert child.returncode == 0, child.stderr[-3000:]
    for name, outcome in report["results"].items():
        assert outcome != "no error", f"{name} succeeded on a shut-down file system"
        kind, message = outcome
        assert kind == "OSError", (name, outcome)
        assert "Input/output error" in message and str(mount_point) in message, (name, message)
    # remounted, the file holds the committed update, every element
    subprocess.run(["umount", str(mount_point)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount_point)], check=True)
    np.testing.assert_array_equal(np.load(mount_point / "x.npy"), start + 1.0)
