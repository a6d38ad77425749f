"""Integer reductions, scans, products and scatter-adds are exact: bit for bit jax.numpy's values
for every integer dtype, with x64 on (int64 and uint64 values near 2**62, whose partial sums pass
2**53 and 2**64) and for narrow integers whose sums and products wrap to their width, at a budget
that cuts every op into many blocks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import DEFAULT_BUDGET

SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
SHAPE = (61, 7, 5)  # not a multiple of any block; 2135 elements, 17 KB as int64


@pytest.fixture(autouse=True)
def x64_and_small_budget():
    with jax.enable_x64(True):
        jask.set_memory_budget("4KB")
        yield
        jask.set_memory_budget(DEFAULT_BUDGET)


def values(name: str, shape=SHAPE, seed=0) -> np.ndarray:
    """Values whose sums pass the dtype's range many times: 64-bit ones within 2**10 of +-2**62
    (uint64: of 2**62 and 2**63), so that they differ below a double's precision."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(name)
    if dt.itemsize == 8:
        big = np.int64(2**62)
        small = rng.integers(-(2**10), 2**10, size=shape)
        if dt.kind == "u":
            base = np.where(small % 2 == 0, 2**62, 2**63).astype(np.uint64)
            return base + (small + 2**10).astype(np.uint64)
        return np.where(small % 2 == 0, big, -big) + small
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def same(actual, expected):
    """Shapes, dtypes and every bit equal."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, (a.dtype, e.dtype)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_array_equal(a, e)


def check(f, *arrays):
    """f on DiskArrays, eagerly and under jax.jit, against f on jax.Arrays."""
    expected = f(*map(jnp.asarray, arrays))
    same(f(*map(disk, arrays)), expected)
    same(jax.jit(f)(*map(disk, arrays)), expected)


REDUCTIONS = {"sum": jnp.sum, "prod": jnp.prod, "max": jnp.max, "min": jnp.min}


@pytest.mark.parametrize("name", SIGNED + UNSIGNED)
@pytest.mark.parametrize("reduction", list(REDUCTIONS))
def test_reductions_full_and_along_axes(name, reduction):
    x = values(name)
    if reduction == "prod":
        x = x | np.asarray(1, x.dtype)  # odd factors: a wrapped product never becomes 0
    fn = REDUCTIONS[reduction]
    # dtype=x.dtype: jnp.sum of an int8 array would otherwise sum in int64
    kwargs = {"dtype": x.dtype} if reduction in ("sum", "prod") else {}
    # At 4KB results of up to 128 elements accumulate in memory (all axes); larger ones fold
    # runs of trailing axes (axis 2), after a transpose on disk when the axis is not last (1).
    for axis in (None, 1, 2):
        check(lambda a, axis=axis: fn(a, axis=axis, **kwargs), x)


@pytest.mark.parametrize("name", ("int8", "uint8", "int32", "int64", "uint64"))
def test_sum_promoted_as_jnp(name):
    # jnp.sum of a narrow integer sums in the default integer (int64 here): values past 2**53
    check(lambda a: jnp.sum(a), values(name))
    check(lambda a: jnp.sum(a, axis=1), values(name))


@pytest.mark.parametrize("name", ("int32", "int64", "uint64"))
def test_reductions_of_elementwise_results(name):
    # under jit the elementwise program and the reduction may run as one engine call
    jask.set_memory_budget("16KB")  # two int64 operands' blocks beside what XLA holds
    x, y = values(name), values(name, seed=3)
    check(lambda a, b: jnp.sum(a * b + a), x, y)
    check(lambda a, b: jnp.max(a - b, axis=1), x, y)
    check(lambda a, b: jnp.prod((a | 1) * (b | 1), axis=(0, 2)), x, y)


def argmax(a, axis):
    return jax.lax.argmax(a, axis, jnp.int32)  # (Jask gives int32 indices)


def argmin(a, axis):
    return jax.lax.argmin(a, axis, jnp.int32)


@pytest.mark.parametrize("name", ("int8", "uint32", "int64", "uint64"))
def test_vdot_and_dot_of_vectors(name):
    x, y = values(name, (700,)), values(name, (700,), seed=8)
    check(jnp.vdot, x, y)
    check(jnp.dot, x, y)


def test_max_min_at_the_ends_of_int64_and_uint64():
    x = np.full(SHAPE, np.iinfo(np.int64).max - 5, np.int64)
    x[3, 4, 2] = np.iinfo(np.int64).max - 4  # one above: a double cannot tell them apart
    x[7, 1, 1] = np.iinfo(np.int64).min + 1
    x[8, 1, 1] = np.iinfo(np.int64).min + 2
    for fn in (jnp.max, jnp.min):
        check(lambda a, fn=fn: fn(a), x)
        check(lambda a, fn=fn: fn(a, axis=0), x)
    for fn in (argmax, argmin):
        check(lambda a, fn=fn: fn(a, 0), x)
        check(lambda a, fn=fn: fn(a, 1), x)
    u = np.full(SHAPE, 2**64 - 9, np.uint64)
    u[5, 2, 3] = 2**64 - 1
    u[9, 0, 0] = 2**63
    for fn in (jnp.max, jnp.min):
        check(lambda a, fn=fn: fn(a, axis=2), u)
    for fn in (argmax, argmin):
        check(lambda a, fn=fn: fn(a, 2), u)


def test_sort_and_argsort_of_int64_past_2_53():
    x = values("int64", (13, 41))
    u = values("uint64", (13, 41))
    for a in (x, u):
        check(lambda v: jnp.sort(v, axis=1), a)
        check(lambda v: jnp.argsort(v, axis=1, stable=True).astype(jnp.int32), a)
        check(lambda v: jax.lax.top_k(v, 5)[0], a)


CUMULATIVE = {
    "cumsum": jax.lax.cumsum,
    "cumprod": jax.lax.cumprod,
    "cummax": jax.lax.cummax,
    "cummin": jax.lax.cummin,
}


@pytest.mark.parametrize("name", ("int8", "uint16", "int32", "int64", "uint64"))
@pytest.mark.parametrize("op", list(CUMULATIVE))
def test_cumulative_along_each_axis(name, op):
    x = values(name)
    if op == "cumprod":
        x = x | np.asarray(1, x.dtype)
    for axis, reverse in ((0, False), (1, True), (2, True)):
        check(lambda a, axis=axis, r=reverse: CUMULATIVE[op](a, axis=axis, reverse=r), x)


def test_jnp_cumsum_and_cumprod():
    x = values("int64")
    check(lambda a: jnp.cumsum(a, axis=1), x)
    check(lambda a: jnp.cumprod(a | 1, axis=0), x)
    check(lambda a: jnp.cumsum(a, dtype=jnp.int8, axis=2), values("int8"))


@pytest.mark.parametrize("name", ("int8", "uint8", "int32", "uint32", "int64", "uint64"))
def test_matmul_wraps(name):
    a = values(name, (37, 23), seed=1)
    b = values(name, (23, 19), seed=2)
    check(jnp.matmul, a, b)
    check(lambda p, q: p.T @ q.T, b, a)
    check(jnp.matmul, values(name, (3, 9, 23), seed=3), values(name, (3, 23, 6), seed=4))


@pytest.mark.parametrize("name", ("int8", "uint8", "int32", "int64", "uint64"))
def test_scatter_add(name):
    x = values(name, (41, 6), seed=5)
    v = values(name, (90, 6), seed=6)
    idx = np.random.default_rng(7).integers(0, 41, size=90)  # many repeats
    check(lambda a, u: a.at[idx].add(u), x, v)
    check(lambda a: a.at[idx].add(np.asarray(v)), x)


def test_jnp_argmax_and_argmin_give_int64_indices_under_x64():
    """jnp.argmax under x64 asks lax.argmax for int64 indices (the engine counts in int32: the
    rule converts), for any dtype of the values. At 16KB: the jitted program holds the int32
    indices and their int64 copy beside the engine's blocks."""
    jask.set_memory_budget("16KB")
    x = values("int64")
    f = np.random.default_rng(1).standard_normal(SHAPE)
    for a in (x, f):
        for fn in (jnp.argmax, jnp.argmin):
            for axis in (0, 1, 2, None):
                check(lambda v, fn=fn, axis=axis: fn(v, axis=axis), a)
