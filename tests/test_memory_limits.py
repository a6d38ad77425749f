"""Peak memory of Jask ops stays within the budget plus a constant, measured by pytest-memray.

Run with `pytest --memray` (make test does): every allocation of the process during a test is
tracked, including the engine's block buffers (mmap'd) and XLA's. The arrays here are 64 MiB each
against a 16 MiB budget and a limit of the budget + 8 MiB, so an op that materialized an operand
would exceed its limit several times over, and one holding twice its budget (as axis reductions
did before issue 12, widening whole blocks to float64 outside the budget) exceeds it too. Not
counted: OpenBLAS's workspace, allocated once per BLAS thread and kept for the life of the
process (see the fixture).
"""

import jax
import numpy as np
import pytest

import jask

BUDGET = "16MB"
# budget + a constant for Python objects, the engine's registers and small results
LIMIT = "24MB"
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
def test_cumulative_and_sort(arrays):
    x, _, _, _ = arrays
    assert jax.numpy.cumsum(x, axis=0).shape == (ROWS, COLS)
    assert jax.numpy.sort(x, axis=1).shape == (ROWS, COLS)


def _mlp_loss(p, x):
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    return jax.numpy.mean((h @ p["w2"]) ** 2)


def _mlp_params():
    rng = np.random.default_rng(1)
    return {
        "w1": jax.numpy.asarray(rng.uniform(-0.01, 0.01, (COLS, 8)).astype(np.float32)),
        "b1": jax.numpy.zeros(8),
        "w2": jax.numpy.asarray(rng.uniform(-1, 1, (8, 1)).astype(np.float32)),
    }


@pytest.fixture(scope="module")
def compiled(arrays):
    """The jitted MLP and adam step, compiled here: what compiling allocates (MLIR contexts,
    Python objects) is not what a step holds, and would count in the tests' limit."""
    import optax

    x, y, _, _ = arrays
    params = _mlp_params()
    mlp = jax.jit(jax.value_and_grad(_mlp_loss)).lower(params, x).compile()
    opt = optax.adam(1e-3)
    disk_params = {"x": x}
    state = opt.init(disk_params)

    def step(p, state):
        grads = jax.grad(lambda p: jask.sum(jask.square(p["x"] - y)))(p)
        updates, state = opt.update(grads, state, p)
        return optax.apply_updates(p, updates), state

    adam = jax.jit(step).lower(disk_params, state).compile()
    return (mlp, params), (adam, disk_params, state)


@pytest.mark.limit_memory(LIMIT)
def test_jitted_mlp_loss_and_gradient(arrays, compiled):
    x, _, _, _ = arrays
    (mlp, params), _ = compiled
    value, grads = mlp(params, x)
    assert float(value) > 0 and grads["w1"].shape == (COLS, 8)


@pytest.mark.limit_memory(LIMIT)
def test_jitted_adam_step_on_disk_parameters(compiled):
    _, (adam, params, state) = compiled
    new, state = adam(params, state)
    assert new["x"].shape == (ROWS, COLS)


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
    assert "Test was limited to 24.0MiB" in out.stdout
