"""Progress bars: shown for calls past the threshold (0 here), named after the op, ending
at 100%; none when turned off. Bars of ended calls are drawn by _progress._flush(), so
nothing depends on when the poller thread runs."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _progress

N = 20_011


@pytest.fixture
def bars(small_budget):
    """Bars for every call (threshold 0), many blocks per call; state restored after."""
    small_budget("4KB")
    was_enabled, was_threshold = jask.progress_enabled(), _progress._threshold_s
    _progress._flush()  # bars of calls before the test are drawn before capture
    jask.set_progress(True)
    _progress._threshold_s = 0.0
    yield
    _progress._flush()
    _progress._threshold_s = was_threshold
    jask.set_progress(was_enabled)


def bar_lines(text: str, name: str) -> list[str]:
    return [line for line in text.replace("\r", "\n").splitlines() if line.startswith(name + ":")]


def test_an_eager_op_gets_a_bar_ending_at_100(bars, capsys):
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jnp.sum(x)) == N
    _progress._flush()
    lines = bar_lines(capsys.readouterr().err, "sum")
    assert lines and "100%" in lines[-1]
    assert "78.2k" in lines[-1]  # 4 * N bytes, in KiB


def test_a_jitted_program_gets_bars(bars, capsys):
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jax.jit(lambda a: jnp.sum(a * 3.0))(x)) == 3 * N
    _progress._flush()
    lines = bar_lines(capsys.readouterr().err, "jit: mul+sum")
    assert lines and "100%" in lines[-1]


def test_save_tree_and_load_tree_get_one_bar_each(bars, capsys, tmp_path):
    tree = {"a": jask.DiskArray.from_numpy(np.ones(N, np.float32)), "b": np.zeros(3, np.int32)}
    jask.save_tree(tmp_path / "ckpt", tree)
    loaded = jask.load_tree(tmp_path / "ckpt")
    np.testing.assert_array_equal(np.asarray(loaded["a"]), np.ones(N, np.float32))
    err = capsys.readouterr().err
    for name in ("save_tree", "load_tree"):
        lines = bar_lines(err, name)
        assert lines and "100%" in lines[-1], (name, err)
        assert f"{(4 * N + 12) / 1024:.1f}k" in lines[-1]
    assert not bar_lines(err, "save")  # the leaves' calls share the task's bar


def test_no_bars_when_turned_off(bars, capsys):
    jask.set_progress(False)
    x = jask.DiskArray.from_numpy(np.ones(N, np.float32))
    assert float(jnp.sum(x)) == N
    _progress._flush()
    assert capsys.readouterr().err == ""


def test_the_environment_turns_them_off():
    import subprocess
    import sys

    code = "import jask; print(jask.progress_enabled())"
    env = {**os.environ, "JASK_PROGRESS": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
