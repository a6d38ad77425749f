"""Scratch space: where files go, when they are deleted, and what survives a crash."""

import gc
import os
import signal
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import jask
from jask import _engine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, cwd, check=True):
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, check=check, timeout=120)


def test_op_output_is_deleted_with_its_diskarray(rng):
    x = jask.DiskArray.from_numpy(rng.uniform(size=(50, 3)).astype(np.float32))
    y = x * 2.0
    path = y.path
    assert os.path.exists(path)
    del y
    gc.collect()
    assert not os.path.exists(path)
    assert os.path.exists(x.path)


def test_jit_intermediates_are_reclaimed(rng):
    a, b, c, t = (jask.DiskArray.from_numpy(rng.uniform(size=s).astype(np.float32))
                  for s in ((40, 7), (7, 5), (5, 3), (40, 3)))

    def loss(a, b, c, t):
        return jask.sum(jask.square(jask.dot(jask.dot(a, b), c) - t))

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
    _, grads = step(a, b, c, t)
    del grads
    gc.collect()
    live, files = _engine.live_arrays(), len(os.listdir(jask.scratch_dir()))
    for _ in range(5):
        _, grads = step(a, b, c, t)
        del grads
    gc.collect()
    assert _engine.live_arrays() == live
    assert len(os.listdir(jask.scratch_dir())) == files


def test_default_scratch_is_in_the_working_directory(tmp_path):
    out = run_python("""
        import numpy as np, jask
        x = jask.DiskArray.from_numpy(np.ones(3, np.float32))
        print(x.path)
    """, cwd=tmp_path)
    path = out.stdout.strip()
    assert path.startswith(str(tmp_path / ".jask_scratch" / "proc-"))
    assert os.listdir(tmp_path / ".jask_scratch") == []  # removed at exit


def test_dead_process_folders_are_reclaimed_at_next_start(tmp_path):
    crashed = run_python("""
        import os, signal, numpy as np, jask
        x = jask.DiskArray.from_numpy(np.ones((100, 100), np.float32)) * 3.0
        print(jask.scratch_dir(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """, cwd=tmp_path, check=False)
    assert crashed.returncode == -signal.SIGKILL
    left_behind = crashed.stdout.strip()
    assert os.path.isdir(left_behind) and os.listdir(left_behind)
    run_python("""
        import numpy as np, jask
        jask.DiskArray.from_numpy(np.ones(3, np.float32))
    """, cwd=tmp_path)
    assert not os.path.exists(left_behind)


def test_a_live_process_folder_is_not_reclaimed(tmp_path):
    live = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, numpy as np, jask
            x = jask.DiskArray.from_numpy(np.ones(3, np.float32))
            print(jask.scratch_dir(), flush=True)
            sys.stdin.read()
            print(np.asarray(x).sum(), flush=True)
        """)], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=REPO), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    try:
        folder = live.stdout.readline().strip()
        run_python("import numpy as np, jask; jask.DiskArray.from_numpy(np.ones(3, np.float32))",
                   cwd=tmp_path)
        assert os.path.isdir(folder)
        out, _ = live.communicate("", timeout=60)
        assert out.strip() == "3.0"
    finally:
        live.kill()


def test_tmpfs_scratch_is_refused_unless_allowed(tmp_path, scratch_root):
    shm = "/dev/shm"
    if not os.path.isdir(shm) or not _engine.is_ram_backed(shm):
        pytest.skip("no tmpfs at /dev/shm on this machine")
    target = os.path.join(shm, f"jask-test-{os.getpid()}")
    try:
        with pytest.raises(ValueError, match="RAM-backed.*allow_tmpfs=True"):
            jask.set_memory_budget("64MB", scratch_dir=target)
        jask.set_memory_budget("64MB", scratch_dir=target, allow_tmpfs=True)
        x = jask.DiskArray.from_numpy(np.arange(5, dtype=np.float32)) * 2.0
        assert x.path.startswith(target)
        np.testing.assert_array_equal(np.asarray(x), np.arange(5) * 2.0)
    finally:
        jask.set_memory_budget("64MB", scratch_dir=scratch_root)


def test_scratch_folder_is_private():
    assert os.stat(jask.scratch_dir()).st_mode & 0o777 == 0o700
