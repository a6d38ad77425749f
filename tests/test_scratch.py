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


def run_python(code, cwd, *args, check=True):
    """Runs `code` (dedented) in a new Python with Jask importable, `args` as its argv."""
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
    )


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
    a, b, c, t = (
        jask.DiskArray.from_numpy(rng.uniform(size=s).astype(np.float32))
        for s in ((40, 7), (7, 5), (5, 3), (40, 3))
    )

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
    out = run_python(
        """
        import numpy as np, jask
        x = jask.DiskArray.from_numpy(np.ones(3, np.float32))
        print(x.path)
    """,
        cwd=tmp_path,
    )
    path = out.stdout.strip()
    assert path.startswith(str(tmp_path / ".jask_scratch" / "proc-"))
    assert os.listdir(tmp_path / ".jask_scratch") == []  # removed at exit


def test_dead_process_folders_are_reclaimed_at_next_start(tmp_path):
    crashed = run_python(
        """
        import os, signal, numpy as np, jask
        x = jask.DiskArray.from_numpy(np.ones((100, 100), np.float32)) * 3.0
        print(jask.scratch_dir(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """,
        cwd=tmp_path,
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL
    left_behind = crashed.stdout.strip()
    assert os.path.isdir(left_behind) and os.listdir(left_behind)
    run_python(
        """
        import numpy as np, jask
        jask.DiskArray.from_numpy(np.ones(3, np.float32))
    """,
        cwd=tmp_path,
    )
    assert not os.path.exists(left_behind)


def test_a_live_process_folder_is_not_reclaimed(tmp_path):
    live = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
            import sys, numpy as np, jask
            x = jask.DiskArray.from_numpy(np.ones(3, np.float32))
            print(jask.scratch_dir(), flush=True)
            sys.stdin.read()
            print(np.asarray(x).sum(), flush=True)
        """),
        ],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        folder = live.stdout.readline().strip()
        run_python(
            "import numpy as np, jask; jask.DiskArray.from_numpy(np.ones(3, np.float32))",
            cwd=tmp_path,
        )
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


def _adam_steps(p0, g, steps):
    """`steps` jitted adam steps on DiskArray parameters; returns the final parameters as numpy and
    the scratch pool's reused-file count before and after the steps after the first."""
    import optax

    opt = optax.adam(0.1)

    @jax.jit
    def step(p, state):
        updates, state = opt.update(g, state, p)
        return optax.apply_updates(p, updates), state

    p = jask.DiskArray.from_numpy(p0)
    p, state = step(p, opt.init(p))
    gc.collect()
    before = _engine.scratch_pool_stats()["reused_files"]
    for _ in range(steps - 1):
        p, state = step(p, state)
        gc.collect()
    return np.asarray(p), before, _engine.scratch_pool_stats()["reused_files"]


def _adam_reference(p0, g, steps):
    import jax.numpy as jnp
    import optax

    opt = optax.adam(0.1)
    p = jnp.asarray(p0)
    state = opt.init(p)
    for _ in range(steps):
        updates, state = opt.update(jnp.asarray(g), state, p)
        p = optax.apply_updates(p, updates)
    return np.asarray(p)


def test_training_steps_write_into_the_files_of_the_previous_step(rng):
    """Each step's new parameters and moments (written whole by one fused pass) take the files
    the step before freed, and the values are still exactly adam's."""
    p0 = rng.uniform(-1, 1, (301, 67)).astype(np.float32)
    g = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (301, 67)).astype(np.float32))
    got, before, after = _adam_steps(p0, g, steps=4)
    assert after - before >= 3 * 2, "p, mu and nu of steps 3 and 4 should reuse files"
    np.testing.assert_allclose(got, _adam_reference(p0, np.asarray(g), 4), rtol=1e-5, atol=1e-6)
    stats = _engine.scratch_pool_stats()
    assert stats["pooled_bytes"] <= stats["live_bytes"]


def test_scratch_recycling_can_be_turned_off(rng):
    p0 = rng.uniform(-1, 1, (64, 33)).astype(np.float32)
    g = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (64, 33)).astype(np.float32))
    jask.set_scratch_recycling(False)
    try:
        got, before, after = _adam_steps(p0, g, steps=3)
        assert after == before
        assert _engine.scratch_pool_stats()["pooled_files"] == 0
        assert not [f for f in os.listdir(jask.scratch_dir()) if f.startswith("recycled-")]
    finally:
        jask.set_scratch_recycling(True)
    np.testing.assert_allclose(got, _adam_reference(p0, np.asarray(g), 3), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="bool"):
        jask.set_scratch_recycling("yes")
