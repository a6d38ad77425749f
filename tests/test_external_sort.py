"""Sorts, argsorts and top_k of rows longer than the memory budget holds (jask/ops/merge_sort.py):
values (bit for bit: NaN order, -0.0 and 0.0 kept apart by position) and dtypes against jnp on
jax.Arrays, eagerly and under jit, with several operands and keys, along axis 0, gradients and
tangents against JAX's, and the memory the sort holds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask._api import lax_reductions

BUDGET = 32 * 1024
LONG = 50_003  # a float32 row of 200 KB: 100 windows of a merge at 64 KB, 7 passes
ROW = 5_003  # 40 windows of a float32 merge at 32 KB: 6 passes, the last window partly past the row
SHORT = 2_003  # for derivatives, which sort again: 16 windows, 4 passes


@pytest.fixture(autouse=True)
def budget():
    jask.set_memory_budget(BUDGET)
    yield
    jask.set_memory_budget("64MB")


def _floats(rng, shape):
    """Many ties, NaNs, infinities, and -0.0 beside 0.0."""
    a = rng.integers(-40, 40, shape).astype(np.float32)
    flat = a.reshape(-1)
    flat[::17] = np.nan
    flat[5::23] = -0.0
    flat[7::31] = 0.0
    flat[3::29] = np.inf
    flat[11::37] = -np.inf
    return a


def _bits(x):
    x = np.asarray(x)
    if x.dtype.kind == "f" or x.dtype == jnp.bfloat16:
        return x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return x


def _same(got, want):
    """The same dtype, shape and bits (so NaN at the same places and -0.0 where jnp has it)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def _check(fn, *arrays, modes=("eager", "jit")):
    """fn of DiskArrays, eagerly and jitted, against fn of jax.Arrays (each jitted program
    compiles its sort's loops: the cases that differ only in values run eagerly)."""
    want = fn(*(jnp.asarray(a) for a in arrays))
    disk = [jask.DiskArray.from_numpy(a) for a in arrays]
    for f in [{"eager": fn, "jit": jax.jit(fn)}[m] for m in modes]:
        got = jax.tree.leaves(f(*disk))
        assert len(got) == len(jax.tree.leaves(want))
        for g, w in zip(got, jax.tree.leaves(want)):
            assert isinstance(g, jask.DiskArray)
            _same(g, w)


def _assert_merge_sorted(x, axis=-1, keep=None):
    """The row does not fit the budget: the engine's row sort would refuse it."""
    n = x.shape[axis]
    assert not lax_reductions._rows_fit([x], axis % x.ndim, n if keep is None else keep, 1)


def test_sort_of_a_long_float32_row(rng):
    jask.set_memory_budget(2 * BUDGET)
    a = _floats(rng, LONG)
    _assert_merge_sorted(a)
    _check(jnp.sort, a)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, jnp.bfloat16, np.uint8])
def test_sort_other_dtypes(rng, dtype):
    a = rng.integers(-5, 5, ROW)
    a = (a > 0) if dtype == np.bool_ else a.astype(dtype)
    _assert_merge_sorted(a)
    _check(jnp.sort, a, modes=("eager",))


def test_argsort_is_stable(rng):
    a = _floats(rng, ROW)
    _check(lambda v: jnp.argsort(v, stable=True), a, modes=("eager",))  # jitted: below
    _check(lambda v: jnp.argsort(v, stable=True, descending=True), a)


def test_several_rows_along_every_axis(rng):
    a = _floats(rng, (3, ROW))
    _check(lambda v: jnp.sort(v, axis=1), a, modes=("eager",))
    _check(lambda v: jnp.argsort(v, axis=0), a.T.copy(), modes=("jit",))  # long columns


def test_lax_sort_with_several_operands_and_keys(rng):
    k0 = rng.integers(0, 4, ROW).astype(np.int32)
    k1 = _floats(rng, ROW)
    v = rng.standard_normal(ROW).astype(np.float32)
    flags = rng.random(ROW) > 0.5
    _check(lambda a, b, c: jax.lax.sort((a, b, c), num_keys=2), k0, k1, v)
    _check(lambda a, b: jax.lax.sort((a, b), num_keys=2), flags, k0, modes=("eager",))
    # unstable is stable here: the reference is jnp's stable sort
    stable = jax.lax.sort((jnp.asarray(k1), jnp.asarray(k0)), num_keys=1)
    disk = [jask.DiskArray.from_numpy(o) for o in (k1, k0)]
    for g, w in zip(jax.lax.sort(disk, num_keys=1, is_stable=False), stable):
        _same(g, w)


def test_sort_key_val_with_in_memory_values(rng):
    keys = _floats(rng, ROW)
    values = jnp.asarray(rng.standard_normal(ROW).astype(np.float32))
    fn = lambda k, v: jax.lax.sort_key_val(k, v)
    want = fn(jnp.asarray(keys), values)
    x = jask.DiskArray.from_numpy(keys)
    for f in (fn, jax.jit(fn)):
        for g, w in zip(f(x, values), want):
            _same(g, w)


@pytest.mark.parametrize("k", [1, 9, 150, 2000], ids=lambda k: f"k={k}")
def test_top_k(rng, k):
    """Small k in one pass over the row, large k by the merge sort; IEEE totalOrder largest
    first (NaN, then inf; 0.0 before -0.0), ties by the lower index."""
    a = _floats(rng, (2, ROW))
    a[1, ::41] = -np.nan
    _assert_merge_sorted(a, keep=k)
    _check(lambda v: jax.lax.top_k(v, k), a, modes=("eager", "jit") if k == 9 else ("eager",))


def test_top_k_along_axis_0_and_of_integers(rng):
    a = _floats(rng, (ROW, 2))
    _check(lambda v: jax.lax.top_k(v, 50, axis=0), a, modes=("eager",))
    i = rng.integers(-1000, 1000, ROW).astype(np.int32)
    i[::97] = np.iinfo(np.int32).min  # the largest descending key
    _check(lambda v: jax.lax.top_k(v, 2000), i, modes=("eager",))


def test_gradient_of_a_sorted_row(rng):
    a = rng.standard_normal(SHORT).astype(np.float32)
    w = rng.standard_normal(SHORT).astype(np.float32)
    _assert_merge_sorted(a)
    loss = lambda v: jnp.sort(v).dot(w)
    want = jax.grad(loss)(jnp.asarray(a))
    x = jask.DiskArray.from_numpy(a)
    for g in (jax.grad(loss), jax.jit(jax.grad(loss)), jax.grad(jax.jit(loss))):
        got = g(x)
        assert isinstance(got, jask.DiskArray)
        _same(got, want)
    t = rng.standard_normal(SHORT).astype(np.float32)
    _, t_got = jax.jvp(loss, (x,), (jask.DiskArray.from_numpy(t),))
    _, t_want = jax.jvp(loss, (jnp.asarray(a),), (jnp.asarray(t),))
    np.testing.assert_allclose(t_got, t_want, rtol=1e-4)


@pytest.mark.parametrize("k", [5, 800], ids=lambda k: f"k={k}")
def test_gradients_of_top_k(rng, k):
    a = rng.standard_normal((2, SHORT)).astype(np.float32)
    w = rng.standard_normal((2, k)).astype(np.float32)
    _assert_merge_sorted(a, keep=k)
    loss = lambda v: jnp.sum(jax.lax.top_k(v, k)[0] * w)
    ref = jnp.asarray(a)
    x = jask.DiskArray.from_numpy(a)
    want = jax.grad(loss)(ref)
    for g in (jax.grad(loss), jax.jit(jax.grad(loss))) if k > 100 else (jax.grad(loss),):
        _same(g(x), want)
    t = rng.standard_normal(a.shape).astype(np.float32)
    _, t_got = jax.jvp(loss, (x,), (jask.DiskArray.from_numpy(t),))
    _, t_want = jax.jvp(loss, (ref,), (jnp.asarray(t),))
    np.testing.assert_allclose(t_got, t_want, rtol=1e-4)
    # second order, reverse over reverse: the gradient's own gradient gathers at the kept
    # positions
    loss2 = lambda v: jnp.sum(jax.lax.top_k(v, k)[0] ** 2 * w)
    hvp = lambda v, t: jax.grad(lambda u: jnp.vdot(jax.grad(loss2)(u), t))(v)
    got = hvp(x, jask.DiskArray.from_numpy(t))
    np.testing.assert_allclose(got, hvp(ref, jnp.asarray(t)), rtol=1e-5, atol=1e-6)


def test_gradient_of_values_sorted_along(rng):
    keys = _floats(rng, SHORT)
    v = rng.standard_normal(SHORT).astype(np.float32)
    w = rng.standard_normal(SHORT).astype(np.float32)
    loss = lambda k, v: jnp.sum(jax.lax.sort_key_val(k, v)[1] * w)
    want = jax.grad(loss, argnums=1)(jnp.asarray(keys), jnp.asarray(v))
    got = jax.jit(jax.grad(loss, argnums=1))(*map(jask.DiskArray.from_numpy, (keys, v)))
    _same(got, want)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_the_sort_holds_no_more_than_the_budget(rng, mode):
    """The engine's blocks within the budget less what the program holds, and the program's own
    in-memory values (windows and the sort's copies; not jnp.argsort's iota: the sort's positions
    are those) within half of it; the values as jnp's (the jitted sort, top_k of a large k and
    argsort of tests above)."""
    a = _floats(rng, (2, ROW))
    x = jask.DiskArray.from_numpy(a)
    fn = lambda v: (
        jnp.sort(v, axis=1),
        jax.lax.top_k(v, 2000),
        jnp.argsort(v, axis=1),
    )
    run, held = fn, 0
    if mode == "jit":
        run = jax.jit(fn).lower(x).compile()
        analysis = run.memory_analysis()
        held = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
        assert held <= BUDGET // 2
    jask.reset_memory_peak()
    got = jax.block_until_ready(run(x))
    assert 0 < jask.memory_stats()["blocks_peak"] <= BUDGET - held
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(fn(jnp.asarray(a)))):
        assert isinstance(g, jask.DiskArray)
        _same(g, w)
