"""The lax reduction primitives on DiskArrays (reduce_sum/max/min/prod/and/or), reached through
jax.numpy and jax.lax: values and result dtypes against jnp on every stored dtype, any axes,
NaN, empty axes, int32 wraparound, eagerly and under jit, and the jnp functions built on them."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jask
import jask._api.operands

from conftest import assert_close

SHAPE = (37, 23, 5)  # no extent a multiple of a block size
AXES = [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1), (0, 1, 2)]
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.bool_]
PRIMITIVES = {
    "sum": jax.lax.reduce_sum,
    "max": jax.lax.reduce_max,
    "min": jax.lax.reduce_min,
    "prod": jax.lax.reduce_prod,
    "and": jax.lax.reduce_and,
    "or": jax.lax.reduce_or,
}


def _data(dtype, rng, shape=SHAPE):
    if dtype == np.bool_:
        return rng.random(shape) > 0.3
    if dtype == np.int32:
        return rng.integers(-3, 4, shape).astype(np.int32)
    return rng.uniform(0.5, 1.5, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)


def _reference(name, a, axes):
    """lax's result in x's dtype: float64 arrays reduce in float32 (JAX without x64); the
    16-bit floats are checked against an exact sum rounded once, as the engine folds in double
    (XLA accumulates them in their own precision)."""
    if a.dtype in (np.float16, ml_dtypes.bfloat16):
        exact = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[name]
        return exact(a.astype(np.float64), axis=axes).astype(a.dtype)
    return np.asarray(PRIMITIVES[name](jnp.asarray(a), axes))


def _applies(name, dtype):
    if dtype == np.bool_:
        return name in ("max", "min", "and", "or")
    return name not in ("and", "or")


@pytest.mark.parametrize(
    "name, dtype",
    [(n, d) for n in PRIMITIVES for d in DTYPES if _applies(n, d)],
    ids=lambda v: v if isinstance(v, str) else np.dtype(v).name,
)
def test_every_primitive_dtype_and_axes_matches_lax(name, dtype, rng):
    a = _data(dtype, rng)
    x = jask.DiskArray.from_numpy(a)
    for axes in AXES:
        want = _reference(name, a, axes)
        for fn in (PRIMITIVES[name], jax.jit(PRIMITIVES[name], static_argnums=1)):
            got = fn(x, axes)
            assert isinstance(got, jax.Array) and not isinstance(got, jask.DiskArray)
            assert got.dtype == want.dtype and got.shape == want.shape, (axes, got.dtype)
            tol = 1e-2 if dtype in (np.float16, ml_dtypes.bfloat16) else 1e-5
            assert_close(np.asarray(got, np.float64), want.astype(np.float64), rtol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_], ids=lambda d: np.dtype(d).name)
def test_jnp_reductions_match_jnp(dtype, rng):
    a = _data(dtype, rng)
    x = jask.DiskArray.from_numpy(a)
    fns = [jnp.max, jnp.min, jnp.any, jnp.all] if dtype == np.bool_ else [jnp.sum, jnp.max, jnp.min]
    for fn in fns:
        for axis in (None, 1, (0, 2), -1):
            want = fn(jnp.asarray(a), axis=axis)
            got = fn(x, axis=axis)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert_close(np.asarray(got), np.asarray(want))


def test_large_results_stay_on_disk_with_many_blocks(rng, small_budget, monkeypatch):
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    small_budget("4KB")
    a = _data(np.float32, rng)
    x = jask.DiskArray.from_numpy(a)
    for name in ("sum", "max", "min", "prod"):
        for axes in [(0,), (2,), (0, 2)]:
            got = PRIMITIVES[name](x, axes)
            assert isinstance(got, jask.DiskArray)
            assert_close(np.asarray(got), np.asarray(PRIMITIVES[name](jnp.asarray(a), axes)))


def test_int32_sums_wrap_as_jnp(rng):
    a = np.full((3, 1000), 2**30 + 7, np.int32)
    x = jask.DiskArray.from_numpy(a)
    for axis in (None, 1, 0):
        want = jnp.sum(jnp.asarray(a), axis=axis)
        np.testing.assert_array_equal(np.asarray(jnp.sum(x, axis=axis)), np.asarray(want))
        np.testing.assert_array_equal(np.asarray(jax.jit(jnp.sum)(x)), np.asarray(jnp.sum(a)))


def test_nan_propagates_through_max_and_min(rng):
    a = rng.standard_normal((9, 13)).astype(np.float32)
    a[2, 3] = a[7, 0] = np.nan
    x = jask.DiskArray.from_numpy(a)
    for fn in (jnp.max, jnp.min, jnp.sum, jnp.nanmax, jnp.nanmin):
        for axis in (None, 0, 1):
            want = np.asarray(fn(jnp.asarray(a), axis=axis))
            np.testing.assert_allclose(np.asarray(fn(x, axis=axis)), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_], ids=lambda d: np.dtype(d).name)
def test_empty_axes_give_the_identity(dtype):
    a = np.zeros((0, 4), dtype)
    x = jask.DiskArray.from_numpy(a)
    for name in PRIMITIVES:
        if _applies(name, dtype):
            got, want = PRIMITIVES[name](x, (0,)), PRIMITIVES[name](jnp.asarray(a), (0,))
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_bitwise_reductions_of_integers_are_computed_by_xla():
    """Jask's rule reduces booleans; integers take XLA's route (in memory when they fit)."""
    a = np.array([[5, 7, 12, 1], [6, 3, 14, 9], [7, 11, 13, 3]], np.int32)
    x = jask.DiskArray.from_numpy(a)
    for reduce in (jax.lax.reduce_and, jax.lax.reduce_or, jax.lax.reduce_xor):
        out, expected = reduce(x, (0,)), reduce(jnp.asarray(a), (0,))
        assert out.dtype == expected.dtype
        np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))


def test_functions_built_on_the_primitives_match_jnp(rng):
    a = rng.standard_normal((31, 17)).astype(np.float32)
    x = jask.DiskArray.from_numpy(a)
    fns = [
        lambda v: jnp.mean(v, axis=0),
        lambda v: jnp.var(v, axis=1),
        lambda v: jnp.std(v, axis=1, ddof=1),
        lambda v: jnp.sum(v, axis=1, where=a > 0),
        lambda v: v.sum(axis=0, where=a < 0),
        lambda v: jnp.mean(v, where=a > 0.5),
        lambda v: jnp.linalg.norm(v),
        lambda v: jnp.linalg.norm(v, axis=0),
        lambda v: jnp.linalg.norm(v, ord=1, axis=1),
        lambda v: jnp.linalg.norm(v, ord=np.inf, axis=1),
        lambda v: jax.nn.logsumexp(v, axis=1),
        lambda v: jax.nn.logsumexp(v, axis=0, keepdims=True),
        lambda v: jax.nn.softmax(v, axis=1),
        lambda v: jax.nn.log_softmax(v, axis=0),
        lambda v: jnp.max(v, axis=1, keepdims=True),
        lambda v: v.min(axis=(0, 1), keepdims=True),
        lambda v: jnp.prod(v * 0.1 + 1, axis=0),
    ]
    for fn in fns:
        want = fn(jnp.asarray(a))
        for f in (fn, jax.jit(fn)):
            got = f(x)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert_close(np.asarray(got), np.asarray(want))


def test_gradients_of_jnp_reductions_match_jnp(rng):
    a = rng.standard_normal((31, 17)).astype(np.float32)
    x = jask.DiskArray.from_numpy(a)
    losses = [
        lambda v: jnp.sum(jnp.max(v, axis=1) ** 2),
        lambda v: jnp.sum(jnp.min(v, axis=0) * jnp.arange(17.0)),
        lambda v: jnp.sum(jnp.var(v, axis=1)),
        lambda v: jnp.sum(jnp.linalg.norm(v, axis=0)),
        lambda v: jnp.sum(jax.nn.logsumexp(v, axis=1)),
        lambda v: jnp.sum(jnp.sum(v, axis=0, where=a > 0) ** 2),
        lambda v: jnp.sum(jnp.prod(v * 0.1 + 1, axis=1)),
    ]
    for loss in losses:
        want = jax.grad(loss)(jnp.asarray(a))
        for g in (jax.grad(loss), jax.jit(jax.grad(loss))):
            assert_close(np.asarray(g(x)), np.asarray(want), rtol=1e-4)
        _, t = jax.jvp(loss, (x,), (x,))
        _, t_want = jax.jvp(loss, (jnp.asarray(a),), (jnp.asarray(a),))
        assert_close(t, t_want, rtol=1e-4)
