"""Matrix products with batch axes, in-memory weights and batched einsum: errors, tiny budgets,
gradients with respect to in-memory weights, and a small MLP against jax.numpy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _engine
from jask.ops import Matmul

from conftest import assert_close


def disk(x):
    return jask.DiskArray.from_numpy(x)


@pytest.fixture
def data(rng):
    return lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)


def test_errors_and_promotion_as_jnp(data):
    """jask.matmul and `@` are jnp.matmul: its shape errors (or dot_general's, naming both
    operands), its dtype promotion."""
    a_np = data(5, 4, 6)
    a = disk(a_np)
    with pytest.raises(
        TypeError,
        match=r"contracting dimensions.*\(6,\) and \(7,\).*"
        r"float32\[5,4,6\].*float32\[5,7,3\]",
    ):
        jask.matmul(a, disk(data(5, 7, 3)))
    with pytest.raises(ValueError, match=r"float32\[5,4,6\].*float32\[2,6,3\]"):
        a @ disk(data(2, 6, 3))
    with pytest.raises(TypeError, match=r"contracting dimensions.*\(6,\) and \(5,\)"):
        a @ disk(data(5))
    with pytest.raises(ValueError, match=r"float32\[5,4,6\].*float32\[2,6,3\]"):  # at trace time
        jax.jit(jnp.matmul)(a, disk(data(2, 6, 3)))
    with pytest.raises(TypeError, match="list"):
        jask.matmul(a, [[1.0]])
    for other in (jnp.ones((6, 3), jnp.bfloat16), np.arange(18, dtype=np.int32).reshape(6, 3)):
        expected = jnp.asarray(a_np) @ jnp.asarray(other)
        for b in (other, disk(np.asarray(other))):
            product = a @ b
            assert product.dtype == expected.dtype
            assert_close(np.asarray(product), expected, rtol=1e-2)
    w = data(6, 3)
    assert_close(np.asarray(jask.dot(a, disk(w))), np.dot(a_np, w))


def test_einsum_specs_beyond_one_contraction_and_errors(data):
    a_np, b_np = data(5, 4, 6), data(5, 6, 3)
    a, b = disk(a_np), disk(b_np)
    for spec in ("bij,bjk->ik", "bij,bjk->bk", "bij,bij->"):
        other, other_np = (b, b_np) if spec.endswith(("ik", "bk")) else (a, a_np)
        assert_close(np.asarray(jask.einsum(spec, a, other)), np.einsum(spec, a_np, other_np))
    spec = "...ij,...jk->...ik"
    assert_close(np.asarray(jask.einsum(spec, a, b)), np.einsum(spec, a_np, b_np))
    with pytest.raises(ValueError, match="Size of label"):  # jnp.einsum's own check
        jask.einsum("bij,bjk->bik", a, a)


def test_batches_fold_into_rows_when_the_right_operand_has_none(data, monkeypatch):
    shapes = []
    original = Matmul.__init__

    def record(self, *avals, **params):
        shapes.append(tuple(a.shape for a in avals))
        original(self, *avals, **params)

    monkeypatch.setattr(Matmul, "__init__", record)
    x_np, w_np = data(5, 41, 29), data(29, 13)
    out = disk(x_np) @ disk(w_np)
    assert set(shapes) == {((5 * 41, 29), (29, 13))}  # one 2-D product, no batch loop
    assert out.shape == (5, 41, 13)
    assert_close(np.asarray(out), x_np @ w_np)


def test_many_tiles_per_matrix_at_a_tiny_budget(data, small_budget):
    small_budget("4KB")
    a_np, b_np = data(3, 1, 41, 29), data(4, 29, 13)
    before = _engine.pipeline_tasks_run()
    out = jask.matmul(disk(a_np), disk(b_np))
    assert _engine.pipeline_tasks_run() - before >= 12 * 4, (
        "each of the 12 products should take several tiles"
    )
    assert_close(np.asarray(out), np.matmul(a_np, b_np))
    grads = jax.grad(lambda a, b: jask.sum(jask.square(a @ b)), argnums=(0, 1))(
        disk(a_np), disk(b_np)
    )
    expected = jax.grad(lambda a, b: jnp.sum((a @ b) ** 2), argnums=(0, 1))(a_np, b_np)
    for g, e in zip(grads, expected):
        assert isinstance(g, jask.DiskArray) and g.shape == e.shape
        assert_close(np.asarray(g), e)


def test_a_deep_contraction_read_in_long_runs_matches_jnp(data, small_budget):
    """x (40, 70001) @ w (70001, 3) at 4 MB: all of the product fits, and A's rows would be
    read in runs of 48 KiB; the engine's strip plan (planner.cpp) reads them in runs of 128
    KiB, K tile by K tile over row tiles of x (4 x 3 tasks). Values, dtype, jit and grads
    against jnp; the engine's blocks within the budget."""
    small_budget("4MB")
    x_np, w_np = data(40, 70001), data(70001, 3)
    x, w = disk(x_np), disk(w_np)
    expected = np.asarray(x_np, np.float64) @ np.asarray(w_np, np.float64)
    jask.reset_memory_peak()
    before = _engine.pipeline_tasks_run()
    product = x @ w
    assert _engine.pipeline_tasks_run() - before == 4 * 3
    stats = jask.memory_stats()
    assert 0 < stats["blocks_peak"] <= stats["budget"] == 4 << 20
    assert isinstance(product, jask.DiskArray) and product.dtype == jnp.float32
    assert_close(np.asarray(product), expected)
    assert_close(np.asarray(jax.jit(jnp.matmul)(x, w)), expected)
    loss = lambda a, b: jnp.sum(jnp.square(a @ b))  # noqa: E731
    grads = jax.grad(loss, argnums=(0, 1))(x, w)
    want = jax.jit(jax.grad(loss, argnums=(0, 1)))(x_np, w_np)
    for g, e in zip(grads, want):
        assert isinstance(g, jask.DiskArray) and g.shape == e.shape and g.dtype == e.dtype
        assert_close(np.asarray(g), e)


def test_vector_products(data):
    u, v, m = data(29), data(29), data(3, 29, 4)
    inner = disk(u) @ disk(v)
    assert isinstance(inner, jax.Array) and inner.shape == ()
    assert_close(inner, u @ v)
    assert_close(np.asarray(disk(u) @ disk(m)), u @ m)
    assert_close(np.asarray(jnp.matmul(jnp.asarray(u), disk(m))), u @ m)


@pytest.mark.parametrize("side", ["right", "left"])
def test_gradient_of_an_in_memory_weight_is_a_jax_array(data, side):
    x_np = data(5, 41, 29)
    w_np = data(29, 13) if side == "right" else data(7, 41)
    x = disk(x_np)

    def loss(w, x):
        y = x @ w if side == "right" else w @ x
        return jnp.sum(jnp.tanh(y))

    expected = jax.grad(loss, argnums=(0, 1))(w_np, x_np)
    w = jnp.asarray(w_np)
    for grad_fn in (
        jax.grad(loss, argnums=(0, 1)),
        jax.jit(jax.grad(loss, argnums=(0, 1))),
        jax.grad(jax.jit(loss), argnums=(0, 1)),
    ):
        g_w, g_x = grad_fn(w, x)
        assert isinstance(g_w, jax.Array) and not isinstance(g_w, jask.DiskArray)
        assert isinstance(g_x, jask.DiskArray)
        assert_close(g_w, expected[0])
        assert_close(np.asarray(g_x), expected[1])
    t_np = data(*w_np.shape)
    _, tangent = jax.jvp(lambda w: loss(w, x), (w,), (jnp.asarray(t_np),))
    # a sum of 2665 terms of either sign: float32's error scales with the terms' magnitudes,
    # not the sum's (each side's summation order depends on the CPU's vector width)
    x64, w64, t64 = (a.astype(np.float64) for a in (x_np, w_np, t_np))
    y, dy = (x64 @ w64, x64 @ t64) if side == "right" else (w64 @ x64, t64 @ x64)
    terms = (1 - np.tanh(y) ** 2) * dy
    for value in (tangent, jax.jvp(lambda w: loss(w, x_np), (w_np,), (t_np,))[1]):
        assert abs(float(value) - terms.sum()) <= 1e-6 * np.abs(terms).sum()


@pytest.mark.parametrize("weights_on_disk", [False, True])
def test_two_layer_mlp_loss_and_gradient_under_jit(data, small_budget, weights_on_disk):
    small_budget("64KB")
    x_np, y_np = data(4, 37, 23), data(4, 37, 5)
    params_np = {"w1": data(23, 19), "b1": data(19), "w2": data(19, 5), "b2": data(5)}

    def mlp_loss(params, x, y):
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)

    expected_loss, expected_grads = jax.value_and_grad(mlp_loss)(params_np, x_np, y_np)
    params = {
        k: disk(v) if weights_on_disk and k.startswith("w") else jnp.asarray(v)
        for k, v in params_np.items()
    }
    loss, grads = jax.jit(jax.value_and_grad(mlp_loss))(params, disk(x_np), disk(y_np))
    assert_close(loss, expected_loss)
    for k, g in grads.items():
        on_disk = weights_on_disk and k.startswith("w")
        assert isinstance(g, jask.DiskArray) == on_disk, k
        assert_close(np.asarray(g), expected_grads[k])


@pytest.mark.parametrize(
    "spec, shapes",
    [
        ("bij,bjk->bik", ((3, 6, 4), (3, 4, 5))),
        ("bij,jk->bik", ((3, 6, 4), (4, 5))),
        ("bik,bjk->bij", ((3, 6, 4), (3, 5, 4))),
        ("ij,bjk->bik", ((6, 4), (3, 4, 5))),
        ("bi,bi->b", ((3, 4), (3, 4))),
        ("bj,bjk->bk", ((3, 4), (3, 4, 5))),
        ("bij,bj->bi", ((3, 6, 4), (3, 4))),
        ("abij,bjk->abki", ((2, 3, 6, 4), (3, 4, 5))),
        ("bi,bj->bij", ((3, 4), (3, 5))),
        ("ij,jk->ki", ((6, 4), (4, 5))),
        ("i,j->ji", ((4,), (5,))),
    ],
)
def test_einsum_batch_specs_eager_and_jit(spec, shapes, data):
    dense = [data(*s) for s in shapes]
    expected = np.einsum(spec, *dense)
    for fn in (jask.einsum, jax.jit(jnp.einsum, static_argnums=0)):
        assert_close(np.asarray(fn(spec, *(disk(x) for x in dense))), expected)
    # one operand in memory (a weight)
    assert_close(np.asarray(jnp.einsum(spec, disk(dense[0]), jnp.asarray(dense[1]))), expected)
