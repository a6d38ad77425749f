"""Peak memory of Jask ops stays within the budget plus a constant, measured by pytest-memray.

Run with `pytest --memray` (make test does): every allocation of the process during a test is
tracked, including the engine's block buffers (mmap'd) and XLA's. The arrays here are 64 MiB each
against a 4 MiB budget, so an op that materialized an operand would exceed its limit many times
over. Not counted: OpenBLAS's workspace, allocated once per BLAS thread and kept for the life of
the process (see the fixture).
"""

import jax
import numpy as np
import pytest

import jask

BUDGET = "4MB"
# budget + a constant for Python objects, the engine's registers and small results
LIMIT = "12MB"
ROWS, COLS = 4096, 4096  # 64 MiB of float32


@pytest.fixture(scope="module")
def arrays():
    jask.set_memory_budget(BUDGET)
    rng = np.random.default_rng(0)
    x = jask.zeros((ROWS, COLS)) + 1.5
    y = jask.full((ROWS, COLS), 0.5)
    w = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (COLS, 8)).astype(np.float32))
    bias = jax.numpy.asarray(rng.uniform(-1, 1, COLS).astype(np.float32))
    # OpenBLAS allocates a packing workspace (32 MiB) for each of its threads the first time
    # that thread multiplies, and keeps it. Which threads a product uses depends only on its
    # tile shapes, so running the tests' own product here (same shapes, same budget) reaches
    # every thread they will use, and the tests measure what Jask's ops allocate on every run.
    # (A small warm-up such as w.T @ w ran on one thread only, and the test's product then
    # allocated the second thread's workspace inside the limit.)
    jask.dot(x, w)
    yield x, y, w, bias
    jask.set_memory_budget("64MB")


@pytest.mark.limit_memory(LIMIT)
def test_elementwise_and_reduction(arrays):
    x, y, _, bias = arrays
    z = (x - y) * 2.0 + bias
    assert float(jask.sum(jask.square(z))) > 0


@pytest.mark.limit_memory(LIMIT)
def test_matmul_and_transpose(arrays):
    x, _, w, _ = arrays
    assert jask.dot(x, w).shape == (ROWS, 8)
    assert x.T.shape == (COLS, ROWS)


@pytest.mark.limit_memory(LIMIT)
def test_axis_reductions(arrays):
    x, _, _, _ = arrays
    assert jask.sum(x, axis=0).shape == (COLS,)
    assert jask.max(x, axis=1).shape == (ROWS,)


@pytest.mark.limit_memory(LIMIT)
def test_gradient(arrays):
    x, y, _, _ = arrays
    g = jax.grad(lambda x: jask.sum(jask.square(x - y)))(x)
    assert g.shape == x.shape


CONTROL = """
import jask, pytest
from test_memory_limits import LIMIT, arrays  # noqa: F401 - the fixture

@pytest.mark.limit_memory(LIMIT)
def test_materialize(arrays):
    assert jask.materialize(arrays[0]).shape == (4096, 4096)
"""


def test_the_limit_catches_a_materialized_array(tmp_path):
    """The control: the same limit fails a test that materializes one 64 MiB operand."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    (tmp_path / "test_control.py").write_text(CONTROL)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--memray",
        "-q",
        "-p",
        "no:cacheprovider",
        str(tmp_path / "test_control.py"),
    ]
    out = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=here),
        timeout=300,
    )
    assert out.returncode == 1, out.stdout[-2000:]
    assert "Test was limited to 12.0MiB" in out.stdout
