"""Integer-array row gathers (jask.take, jnp.take(x, idx, axis=0)) and their gradients:
concrete and traced indices, duplicates, negative and out-of-range indices, results in memory
and on disk, tiny budgets, and a mini-batch training step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
import jask._api.operands
from jask import _engine

from conftest import assert_close

N_ROWS, D = 97, 13
IDX = np.array([3, 5, 5, -1, 0, N_ROWS - 1, 4, 3, 3, 60, -N_ROWS])  # duplicates and negatives


@pytest.fixture
def data(rng):
    x_np = rng.uniform(-1, 1, (N_ROWS, D)).astype(np.float32)
    return x_np, jask.DiskArray.from_numpy(x_np)


def random_indices(seed, count, n=N_ROWS):
    """Random mini-batch indices with duplicates (count > n/2 makes some certain)."""
    return jax.random.randint(jax.random.key(seed), (count,), 0, n)


def test_concrete_indices_eager_and_jit(data):
    x_np, x = data
    for fn in (
        lambda x: jask.take(x, IDX, axis=0),
        jax.jit(lambda x: jask.take(x, IDX, axis=0)),
        lambda x: jnp.take(x, IDX, axis=0),
        jax.jit(lambda x: jnp.take(x, jnp.asarray(IDX), axis=0)),
    ):
        out = fn(x)
        assert isinstance(out, jax.Array) and out.shape == (len(IDX), D)
        np.testing.assert_array_equal(np.asarray(out), x_np[IDX])


def test_index_lists_scalars_and_empty_arrays(data):
    x_np, x = data
    np.testing.assert_array_equal(
        np.asarray(jask.take(x, np.array([2, -2, 2]), axis=0)), x_np[[2, -2, 2]]
    )
    np.testing.assert_array_equal(np.asarray(jask.take(x, np.int64(7), axis=0)), x_np[7])
    np.testing.assert_array_equal(
        np.asarray(jax.jit(lambda x, i: jask.take(x, i, axis=0))(x, 7)), x_np[7]
    )
    assert jask.take(x, np.zeros(0, np.int32), axis=0).shape == (0, D)


def test_traced_indices_with_duplicates(data):
    x_np, x = data
    step = jax.jit(lambda x, idx: jask.take(x, idx, axis=0))
    for seed in range(3):
        idx = random_indices(seed, 256)
        assert len(np.unique(np.asarray(idx))) < 256  # duplicates for sure
        np.testing.assert_array_equal(np.asarray(step(x, idx)), x_np[np.asarray(idx)])
    # indices drawn inside the jitted function
    draw = jax.jit(lambda x, key: jask.take(x, jax.random.randint(key, (64,), 0, N_ROWS), axis=0))
    key = jax.random.key(5)
    np.testing.assert_array_equal(
        np.asarray(draw(x, key)), x_np[np.asarray(jax.random.randint(key, (64,), 0, N_ROWS))]
    )


def test_jnp_take_modes_and_flattened_default(data):
    x_np, x = data
    wild = np.array([-200, -1, 5, 96, 500])
    np.testing.assert_array_equal(
        np.asarray(jnp.take(x, wild, axis=0, mode="clip")),
        np.asarray(jnp.take(x_np, wild, axis=0, mode="clip")),
    )
    np.testing.assert_array_equal(
        np.asarray(jnp.take(x, wild, axis=0, mode="wrap")),
        np.asarray(jnp.take(x_np, wild, axis=0, mode="wrap")),
    )
    flat = np.array([0, 5, N_ROWS * D - 1, 5])
    np.testing.assert_array_equal(np.asarray(jnp.take(x, flat)), x_np.reshape(-1)[flat])


def test_gradients_accumulate_duplicates(data):
    x_np, x = data

    def loss(x, idx):
        return jnp.sum(jnp.sin(jask.take(x, idx, axis=0)) * jnp.arange(D, dtype=jnp.float32))

    def ref(x, idx):
        return jnp.sum(jnp.sin(jnp.take(x, idx, axis=0)) * jnp.arange(D, dtype=jnp.float32))

    idx = random_indices(1, 200)
    for indices in (IDX, idx):
        expected = jax.jit(jax.grad(ref))(x_np, indices)
        for grad_fn in (jax.grad(loss), jax.jit(jax.grad(loss)), jax.grad(jax.jit(loss))):
            got = grad_fn(x, indices)
            assert isinstance(got, jask.DiskArray) and got.shape == x.shape
            assert_close(np.asarray(got), expected)
    # row 3 appears three times in IDX: its gradient is three times one row's
    ones = jax.grad(lambda x: jnp.sum(jask.take(x, IDX, axis=0)))(x)
    counts = np.bincount(np.where(IDX < 0, IDX + N_ROWS, IDX), minlength=N_ROWS)
    np.testing.assert_array_equal(
        np.asarray(ones), np.repeat(counts[:, None], D, 1).astype(np.float32)
    )


def test_no_gradient_for_the_indices(data):
    _, x = data
    _, pullback = jax.vjp(lambda x, i: jask.take(x, i, axis=0), x, jnp.asarray(IDX, jnp.int32))
    g_x, g_idx = pullback(jnp.ones((len(IDX), D), jnp.float32))
    assert isinstance(g_x, jask.DiskArray)
    assert g_idx.dtype == jax.dtypes.float0


def test_large_results_stay_on_disk(data, monkeypatch):
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    x_np, x = data
    idx = random_indices(2, 150)
    for fn in (lambda x, i: jask.take(x, i, axis=0), jax.jit(lambda x, i: jask.take(x, i, axis=0))):
        out = fn(x, idx)
        assert isinstance(out, jask.DiskArray) and out.shape == (150, D)
        np.testing.assert_array_equal(np.asarray(out), x_np[np.asarray(idx)])
    w = np.linspace(-1, 1, 150 * D, dtype=np.float32).reshape(150, D)
    w_disk = jask.DiskArray.from_numpy(w)
    expected = jax.grad(lambda x: jnp.vdot(jnp.take(x, idx, axis=0), w))(x_np)
    loss = lambda x, i: jask.vdot(jask.take(x, i, axis=0), w_disk)  # noqa: E731
    for grad_fn in (jax.grad(loss), jax.jit(jax.grad(loss)), jax.grad(jax.jit(loss))):
        got = grad_fn(x, idx)
        assert isinstance(got, jask.DiskArray)
        assert_close(np.asarray(got), expected)


def test_out_of_range_indices_as_jnp(data):
    """jask.take is jnp.take: out-of-range indices fill with NaN by default, clamp with
    mode="clip", wrap with mode="wrap"; x[idx] clamps (jnp's gathers promise in-bounds)."""
    x_np, x = data
    wild = jnp.asarray([N_ROWS + 5, -N_ROWS - 3, -1, 2 * N_ROWS, 0], jnp.int32)
    for kwargs in ({}, {"mode": "clip"}, {"mode": "wrap"}, {"mode": "fill", "fill_value": -7.0}):
        expected = jnp.take(jnp.asarray(x_np), wild, axis=0, **kwargs)
        for fn in (jask.take, jax.jit(jask.take, static_argnames=("axis", "mode", "fill_value"))):
            got = fn(x, wild, axis=0, **kwargs)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    clamped = jax.jit(lambda x, i: x[i])
    np.testing.assert_array_equal(
        np.asarray(clamped(x, wild)), np.asarray(clamped(jnp.asarray(x_np), wild))
    )


def test_bad_indices_and_other_axes_as_jnp(data):
    x_np, x = data
    for bad, error in ((np.array([1.0], np.float32), ValueError), ([1, 2], TypeError)):
        with pytest.raises(error):
            jnp.take(jnp.asarray(x_np), bad, axis=0)
        with pytest.raises(error):
            jask.take(x, bad, axis=0)
    for axis in (1, -1, None):
        idx = IDX % D
        np.testing.assert_array_equal(
            np.asarray(jask.take(x, idx, axis=axis)), np.asarray(jnp.take(x_np, idx, axis=axis))
        )


def test_three_d_array_and_two_d_indices(rng):
    x_np = rng.uniform(-1, 1, (11, 5, 3)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    idx = np.array([[0, -1, 4], [4, 4, 10]])
    for fn in (lambda x: jask.take(x, idx, axis=0), jax.jit(lambda x: jnp.take(x, idx, axis=0))):
        out = fn(x)
        assert out.shape == (2, 3, 5, 3)
        np.testing.assert_array_equal(np.asarray(out), x_np[idx])
    traced = jax.jit(lambda x, i: jask.take(x, i, axis=0))(x, jnp.asarray(idx))
    np.testing.assert_array_equal(np.asarray(traced), x_np[idx])
    w = rng.uniform(-1, 1, (2, 3, 5, 3)).astype(np.float32)
    expected = jax.grad(lambda x: jnp.sum(jnp.take(x, idx, axis=0) ** 2 * w))(x_np)
    got = jax.jit(jax.grad(lambda x, i: jnp.sum(jask.take(x, i, axis=0) ** 2 * w)))(
        x, jnp.asarray(idx)
    )
    assert_close(np.asarray(got), expected)


def test_tiny_budget_streams_many_blocks(data, small_budget, monkeypatch):
    x_np, x = data
    small_budget("4KB")
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    idx = random_indices(3, 300)
    before = _engine.pipeline_tasks_run()
    out = jax.jit(lambda x, i: jask.take(x, i, axis=0))(x, idx)
    # 4096 bytes / (2 slots x (source + output) x 52-byte rows) = 19 rows a block: 16 blocks
    assert _engine.pipeline_tasks_run() - before >= 16
    np.testing.assert_array_equal(np.asarray(out), x_np[np.asarray(idx)])
    w = jask.DiskArray.from_numpy(np.linspace(-1, 1, 300 * D, dtype=np.float32).reshape(300, D))
    expected = jax.grad(lambda x: jnp.vdot(jnp.take(x, idx, axis=0), np.asarray(w)))(x_np)
    before = _engine.pipeline_tasks_run()
    got = jax.jit(jax.grad(lambda x, i: jask.vdot(jask.take(x, i, axis=0), w)))(x, idx)
    assert _engine.pipeline_tasks_run() - before >= 2 * 16  # the forward gather and the scatter-add
    assert_close(np.asarray(got), expected)


def test_budget_smaller_than_a_row_names_what_is_needed(rng, small_budget):
    x = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (4, 2000)).astype(np.float32))
    small_budget("4KB")
    with pytest.raises(ValueError, match=r"too small for take .*set_memory_budget\(16000\)"):
        jask.take(x, np.array([1, 2]), axis=0)


def test_minibatch_logistic_regression_step(rng):
    n, d, batch = 500, 8, 64
    x_np = rng.normal(size=(n, d)).astype(np.float32)
    y_np = (x_np @ rng.normal(size=d) > 0).astype(np.float32)
    x, y = jask.DiskArray.from_numpy(x_np), jask.DiskArray.from_numpy(y_np)
    traces = []

    def loss(params, xb, yb):
        logits = xb @ params["w"] + params["b"]
        return jnp.mean(jax.nn.softplus(logits) - yb * logits)

    def step(x, y, idx, params):
        traces.append(1)
        return jax.value_and_grad(loss)(params, jnp.take(x, idx, axis=0), jask.take(y, idx, axis=0))

    def ref_step(idx, params):
        return jax.value_and_grad(loss)(params, x_np[idx], y_np[idx])

    jit_step = jax.jit(step)
    params = {"w": jnp.zeros(d), "b": jnp.zeros(())}
    ref_params = params
    key = jax.random.key(0)
    for _ in range(5):
        key, sub = jax.random.split(key)
        idx = jax.random.randint(sub, (batch,), 0, n)
        value, grads = jit_step(x, y, idx, params)
        ref_value, ref_grads = ref_step(np.asarray(idx), ref_params)
        assert_close(value, ref_value)
        assert_close(grads["w"], ref_grads["w"])
        assert_close(grads["b"], ref_grads["b"])
        params = jax.tree.map(lambda p, g: p - 0.5 * g, params, grads)
        ref_params = jax.tree.map(lambda p, g: p - 0.5 * g, ref_params, ref_grads)
    assert len(traces) == 1  # compiled once for every batch
    assert float(value) < float(np.log(2))  # it learned something
