"""Row gathers whose reads run many at once (io/runs: scattered runs of a file with up to 32
requests in flight) and elementwise passes whose blocks are cut between compute threads: the
values and dtypes are exactly NumPy's / the unsplit pass's, at budgets that force many blocks and
at budgets whose blocks are large enough to split."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jask
from jask import _engine

from conftest import assert_trees_match

DTYPES = [np.float32, np.int32, jnp.bfloat16, np.float16]


def table(rng, rows, cols, dtype):
    values = rng.uniform(-100, 100, (rows, cols))
    return values.astype(dtype)


def scattered_indices(rng, n, count):
    """Random rows with duplicates, runs of adjacent rows, both ends and negative indices."""
    idx = rng.integers(0, n, count)
    idx[:40] = np.arange(500, 540)  # one run of adjacent rows
    idx[40:60] = idx[60:80]  # duplicates
    idx[80:84] = [0, n - 1, -1, -n]
    return idx


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("budget", ["16KB", "64MB"])
def test_gather_of_scattered_rows_is_exactly_numpys(rng, small_budget, dtype, budget):
    small_budget(budget)
    x_np = table(rng, 20011, 37, dtype)  # rows of 37 elements: never page-aligned
    x = jask.DiskArray.from_numpy(x_np)
    idx = scattered_indices(rng, x_np.shape[0], 3000)
    tasks = _engine.pipeline_tasks_run()
    got = jask.take(x, idx, axis=0)
    if budget == "16KB":
        assert _engine.pipeline_tasks_run() - tasks >= 20  # many blocks, each a batch of reads
    assert got.dtype == x_np.dtype
    np.testing.assert_array_equal(np.asarray(got), x_np[idx])
    on_disk = jask.take(
        x[3:], idx[idx >= 0] % (x_np.shape[0] - 3), axis=0
    )  # a view at an odd offset
    np.testing.assert_array_equal(
        np.asarray(on_disk), x_np[3:][idx[idx >= 0] % (x_np.shape[0] - 3)]
    )


def test_gather_to_disk_and_its_gradient_scatter_rows_read_from_disk(rng, small_budget):
    small_budget("64KB")
    x_np = table(rng, 30000, 40, np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    idx = scattered_indices(rng, x_np.shape[0], 40000)  # 40000 x 40 elements: a DiskArray
    out = jask.take(x, idx, axis=0)
    assert isinstance(out, jask.DiskArray)
    np.testing.assert_array_equal(np.asarray(out), x_np[idx])
    g = jax.grad(lambda x: jnp.sum(jnp.take(x, jnp.asarray(idx), axis=0) * 0.5))(x)
    want = np.zeros_like(x_np)
    np.add.at(want, idx, np.float32(0.5))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(g), want)


def adam_step(p, g, state):
    opt = optax.adam(1e-3)
    updates, state = opt.update(g, state, p)
    return optax.apply_updates(p, updates), state


def test_adam_pass_with_split_blocks_equals_the_unsplit_pass(rng, small_budget):
    """One fused adam pass: at 64MB each block holds all 700,001 elements and is cut between the
    compute threads; at 256KB blocks are too small to cut. The results agree bit for bit, and
    with optax on jnp arrays."""
    n = 700_001
    p_np, g_np = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    step = jax.jit(adam_step)
    results = {}
    for budget in ("64MB", "256KB"):
        small_budget(budget)
        p, g = jask.DiskArray.from_numpy(p_np), jask.DiskArray.from_numpy(g_np)
        state = optax.adam(1e-3).init(p)
        p1, state = step(p, g, state)
        results[budget] = jax.tree.map(np.asarray, step(p1, g, state))
    split, unsplit = results["64MB"], results["256KB"]
    for a, b in zip(jax.tree.leaves(split), jax.tree.leaves(unsplit), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    p, g = jnp.asarray(p_np), jnp.asarray(g_np)
    state = optax.adam(1e-3).init(p)
    p1, state = step(p, g, state)
    assert_trees_match(split, step(p1, g, state), rtol=1e-5)
