"""argmax/argmin, the cumulative reductions, sort and top_k on DiskArrays through their lax
primitives: values and dtypes against jnp on every axis, eagerly and under jit, at budgets that
force many blocks, NaN order, ties, gradients and tangents against jax's, and the errors where
an axis does not fit the budget."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jask
import jask._api.operands

from conftest import assert_close, jvp_reference

SHAPE = (19, 13, 7)  # no extent a multiple of a block size
CUMULATIVE = {
    "cumsum": jax.lax.cumsum,
    "cumprod": jax.lax.cumprod,
    "cummax": jax.lax.cummax,
    "cummin": jax.lax.cummin,
    "cumlogsumexp": jax.lax.cumlogsumexp,
}


def _positive(rng, shape=SHAPE):
    """Values without zeros or ties, near 1 (products along an axis stay finite)."""
    return rng.uniform(0.8, 1.25, shape).astype(np.float32)


def _check(got, want, rtol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    assert_close(got, want, rtol=rtol)


@pytest.mark.parametrize("budget_", ["64MB", "4KB"])
@pytest.mark.parametrize("name", list(CUMULATIVE))
def test_cumulative_every_axis_and_direction(name, budget_, rng, small_budget):
    small_budget(budget_)
    a = _positive(rng)
    x = jask.DiskArray.from_numpy(a)
    fn = CUMULATIVE[name]
    for axis in range(3):
        for reverse in (False, True):
            want = fn(jnp.asarray(a), axis=axis, reverse=reverse)
            for f in (fn, jax.jit(fn, static_argnames=("axis", "reverse"))):
                got = f(x, axis=axis, reverse=reverse)
                assert isinstance(got, jask.DiskArray)
                _check(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int32])
def test_cumulative_other_dtypes(dtype, rng):
    a = rng.integers(-3, 4, SHAPE) if dtype == np.int32 else rng.standard_normal(SHAPE)
    a = a.astype(dtype)
    x = jask.DiskArray.from_numpy(a)
    for fn in (jax.lax.cumsum, jax.lax.cummax, jax.lax.cummin):
        got = fn(x, axis=1)
        # float64 data is float32 without x64, as in jnp.asarray
        want = np.asarray(fn(jnp.asarray(a), 1))
        assert got.dtype == want.dtype
        assert_close(np.asarray(got, np.float64), want.astype(np.float64), rtol=1e-2)


def test_int32_cumsum_wraps_as_jnp():
    a = np.full((2, 700), 2**29 + 3, np.int32)
    x = jask.DiskArray.from_numpy(a)
    np.testing.assert_array_equal(np.asarray(jnp.cumsum(x, axis=1)), np.asarray(jnp.cumsum(a, 1)))


def test_cumulative_nan_propagates():
    a = np.array([[1.0, np.nan, 3.0, -np.inf], [-np.inf, -np.inf, 2.0, np.inf]], np.float32)
    x = jask.DiskArray.from_numpy(a)
    for name, fn in CUMULATIVE.items():
        want = np.asarray(fn(jnp.asarray(a), axis=1))
        np.testing.assert_allclose(np.asarray(fn(x, axis=1)), want, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", list(CUMULATIVE))
def test_cumulative_gradients_and_tangents_match_jax(name, rng):
    a = _positive(rng, (11, 9, 5))
    w = rng.standard_normal(a.shape).astype(np.float32)
    fn = CUMULATIVE[name]
    for axis in range(3):
        for reverse in (False, True):

            def loss(v, axis=axis, reverse=reverse):
                return jnp.sum(fn(v, axis=axis, reverse=reverse) * w)

            x, ref = jask.DiskArray.from_numpy(a), jnp.asarray(a)
            want = jax.jit(jax.grad(loss))(ref)  # jitted: the reference compiles once
            for g in (jax.grad(loss), jax.jit(jax.grad(loss))):
                got = g(x)
                assert isinstance(got, jask.DiskArray)
                _check(got, want, rtol=1e-4)
            t = jask.DiskArray.from_numpy(w)
            _, t_got = jax.jvp(loss, (x,), (t,))
            _, t_want = jvp_reference(loss, ref, jnp.asarray(w))
            assert_close(t_got, t_want, rtol=1e-4)


def test_cumsum_second_derivative(rng):
    a = _positive(rng, (7, 6))
    loss = lambda v: jnp.sum(jnp.cumsum(v, axis=1) ** 3)
    hvp = lambda f, v, t: jax.jvp(jax.grad(f), (v,), (t,))[1]
    want = hvp(loss, jnp.asarray(a), jnp.asarray(a))
    x = jask.DiskArray.from_numpy(a)
    assert_close(hvp(loss, x, x), want, rtol=1e-4)


def test_cumulative_carry_that_does_not_fit_is_not_implemented(small_budget):
    x = jask.DiskArray.from_numpy(np.ones((3, 4, 1000), np.float32))
    small_budget("8KB")
    with pytest.raises(NotImplementedError, match=r"cumsum along axis 0 of float32\[3,4,1000\]"):
        jnp.cumsum(x, axis=0)
    assert np.asarray(jnp.cumsum(x, axis=2))[2, 3, -1] == 1000


@pytest.mark.parametrize("budget_", ["64MB", "4KB"])
def test_argmax_argmin_every_axis(budget_, rng, small_budget, monkeypatch):
    small_budget(budget_)
    a = rng.integers(0, 5, SHAPE).astype(np.float32)  # many ties: the first index wins
    x = jask.DiskArray.from_numpy(a)
    for fn in (jnp.argmax, jnp.argmin):
        for axis in range(3):
            want = fn(jnp.asarray(a), axis=axis)
            for f in (fn, jax.jit(fn, static_argnames="axis")):
                got = f(x, axis=axis)
                assert not isinstance(got, jask.DiskArray)
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
                assert got.dtype == want.dtype
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    got = jax.lax.argmax(x, 1, jnp.int32)
    assert isinstance(got, jask.DiskArray)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.argmax(a, axis=1)))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int32, np.bool_])
def test_argmax_other_dtypes(dtype, rng):
    a = rng.integers(0, 3, SHAPE) if dtype in (np.int32, np.bool_) else rng.random(SHAPE)
    a = a.astype(dtype)
    x = jask.DiskArray.from_numpy(a)
    for fn in (jnp.argmax, jnp.argmin):
        np.testing.assert_array_equal(np.asarray(fn(x, axis=2)), np.asarray(fn(a, axis=2)))


def test_argmax_takes_the_first_nan():
    a = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, -1.0, 5.0]], np.float32)
    x = jask.DiskArray.from_numpy(a)
    for fn in (jnp.argmax, jnp.argmin):
        for axis in (0, 1):
            np.testing.assert_array_equal(
                np.asarray(fn(x, axis=axis)), np.asarray(fn(jnp.asarray(a), axis=axis))
            )


def test_argmax_has_a_zero_derivative(rng):
    a = rng.standard_normal((9, 8)).astype(np.float32)
    loss = lambda v: jnp.sum(v * jnp.argmax(v, axis=1, keepdims=True).astype(jnp.float32))
    want = jax.grad(loss)(jnp.asarray(a))
    assert_close(jax.grad(loss)(jask.DiskArray.from_numpy(a)), want)


def _sortable(rng, shape=SHAPE):
    a = rng.integers(-4, 5, shape).astype(np.float32)  # ties
    a.flat[::17] = np.nan
    a.flat[5::23] = -0.0
    a.flat[3::29] = np.inf
    return a


@pytest.mark.parametrize("budget_", ["64MB", "4KB"])
def test_sort_and_argsort_every_axis(budget_, rng, small_budget):
    small_budget(budget_)
    a = _sortable(rng)
    x = jask.DiskArray.from_numpy(a)
    for axis in range(3):
        fns = [
            lambda v, axis=axis: jnp.sort(v, axis=axis),
            lambda v, axis=axis: jnp.argsort(v, axis=axis, stable=True),
            lambda v, axis=axis: jax.lax.sort(v, dimension=axis, is_stable=False),
        ]
        for fn in fns:
            want = np.asarray(fn(jnp.asarray(a)))
            for f in (fn, jax.jit(fn)):
                got = f(x)
                assert isinstance(got, jask.DiskArray) and got.dtype == want.dtype
                np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.bool_])
def test_sort_other_dtypes(dtype, rng):
    a = rng.integers(-3, 4, SHAPE) if dtype in (np.int32, np.bool_) else rng.random(SHAPE)
    a = a.astype(dtype)
    if dtype != np.float64:
        return sorts_as_numpy(a)
    # float64 stays float64 only with x64 on, where argsort's indices are int64: not a stored
    # dtype yet (log.md, issue 33).
    with jax.enable_x64(True):
        sorts_as_numpy(a, argsort=False)


def sorts_as_numpy(a, argsort=True):
    x = jask.DiskArray.from_numpy(a)
    assert x.dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(jnp.sort(x, axis=1)), np.sort(a, axis=1))
    if argsort:
        np.testing.assert_array_equal(
            np.asarray(jnp.argsort(x, axis=0, stable=True)), np.argsort(a, axis=0, kind="stable")
        )


def test_sort_with_several_keys_and_operands(rng):
    keys = rng.integers(0, 3, (2, 11, 9)).astype(np.float32)
    values = rng.standard_normal((11, 9)).astype(np.float32)
    fn = lambda k0, k1, v: jax.lax.sort((k0, k1, v), dimension=1, num_keys=2)
    want = fn(*(jnp.asarray(o) for o in (keys[0], keys[1], values)))
    for f in (fn, jax.jit(fn)):
        got = f(*(jask.DiskArray.from_numpy(o) for o in (keys[0], keys[1], values)))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("budget_", ["64MB", "4KB"])
def test_top_k(budget_, rng, small_budget):
    small_budget(budget_)
    a = _sortable(rng)
    x = jask.DiskArray.from_numpy(a)
    for k, axis in [(1, -1), (4, -1), (7, -1), (3, 0), (5, 1)]:
        fn = lambda v, k=k, axis=axis: jax.lax.top_k(v, k, axis=axis)
        want = fn(jnp.asarray(a))
        for f in (fn, jax.jit(fn)):
            values, indices = f(x)
            np.testing.assert_array_equal(np.asarray(values), np.asarray(want[0]))
            np.testing.assert_array_equal(np.asarray(indices), np.asarray(want[1]))
            assert indices.dtype == jnp.int32


def test_sort_and_top_k_gradients_match_jax(rng):
    a = rng.standard_normal((9, 11, 6)).astype(np.float32)  # no ties
    w = rng.standard_normal((9, 11, 6)).astype(np.float32)
    losses = [
        lambda v: jnp.sum(jnp.sort(v, axis=1) * w),
        lambda v: jnp.sum(jnp.sort(v, axis=2) * w),
        lambda v: jnp.sum(jax.lax.top_k(v, 3)[0] * w[..., :3]),
        lambda v: jnp.sum(jax.lax.top_k(v, 2, axis=0)[0] ** 2),
        lambda v: jnp.sum(jax.lax.sort_key_val(w, v, dimension=1)[1] * w),
    ]
    x, ref = jask.DiskArray.from_numpy(a), jnp.asarray(a)
    for loss in losses:
        want = jax.grad(loss)(ref)
        for g in (jax.grad(loss), jax.jit(jax.grad(loss)), jax.grad(jax.jit(loss))):
            got = g(x)
            assert isinstance(got, jask.DiskArray)
            _check(got, want, rtol=1e-5)
        _, t_got = jax.jvp(loss, (x,), (jask.DiskArray.from_numpy(w),))
        _, t_want = jax.jvp(loss, (ref,), (jnp.asarray(w),))
        assert_close(t_got, t_want)


def test_rows_that_do_not_fit_take_the_merge_sort(small_budget, rng):
    """(tests/test_external_sort.py tests the merge sort itself.)"""
    a = rng.integers(0, 9, (3, 2000)).astype(np.float32)
    x = jask.DiskArray.from_numpy(a)
    small_budget("16KB")
    np.testing.assert_array_equal(np.asarray(jnp.sort(x, axis=1)), np.sort(a, axis=1))
    values, indices = jax.lax.top_k(x, 2)
    want = jax.lax.top_k(jnp.asarray(a), 2)
    np.testing.assert_array_equal(np.asarray(values), np.asarray(want[0]))
    np.testing.assert_array_equal(np.asarray(indices), np.asarray(want[1]))
    np.testing.assert_array_equal(np.asarray(jnp.sort(x, axis=0)), np.sort(a, axis=0))


def test_cumprod_derivatives_are_exact_at_zeros(rng):
    """First derivatives everywhere; second derivatives where a line has at most one zero (as
    jnp.prod's)."""
    a = rng.uniform(0.5, 2, (6, 9)).astype(np.float32)
    one_zero = a.copy()
    for i, j in [(0, 2), (1, 0), (2, 8), (3, 3), (4, 5)]:  # one per row and per column
        one_zero[i, j] = 0.0
    two_zeros = one_zero.copy()
    two_zeros[4, 4] = two_zeros[0, 5] = 0.0
    w = rng.standard_normal(a.shape).astype(np.float32)
    for axis in (0, 1):
        for reverse in (False, True):

            def loss(v, axis=axis, reverse=reverse):
                return jnp.sum(jax.lax.cumprod(v, axis=axis, reverse=reverse) * w)

            hvp = lambda v, t, loss=loss: jax.jvp(jax.grad(loss), (v,), (t,))[1]
            for data in (one_zero, two_zeros):
                x, ref = jask.DiskArray.from_numpy(data), jnp.asarray(data)
                _check(jax.grad(loss)(x), jax.jit(jax.grad(loss))(ref))
                _, t_got = jax.jvp(loss, (x,), (jask.DiskArray.from_numpy(w),))
                _, t_want = jvp_reference(loss, ref, jnp.asarray(w))
                assert_close(t_got, t_want)
            x, ref = jask.DiskArray.from_numpy(one_zero), jnp.asarray(one_zero)
            want = jax.jit(hvp)(ref, jnp.asarray(w))
            assert_close(hvp(x, jask.DiskArray.from_numpy(w)), want, rtol=1e-4)
