"""jnp.searchsorted, digitize, histogram, interp and bincount with DiskArrays
(jask/_api/search.py, compat's "searchsorted_of_disk_arrays" patch): values and dtypes against
the same jnp function on jax.Arrays, eager and jitted, at budgets that force many blocks; the
engine calls and bytes of one pass over the data."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.numpy import hijax as jax_hijax

import jask

from conftest import DEFAULT_BUDGET, assert_close

N_QUERIES = 100_003  # not a multiple of any block
N_SMALLER = 30_011  # for functions of several passes


@pytest.fixture
def budget_of():
    yield jask.set_memory_budget
    jask.set_memory_budget(DEFAULT_BUDGET)


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def value(x):
    return np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)


def check_exact(actual, expected):
    a, e = value(actual), np.asarray(expected)
    assert a.dtype == e.dtype, (a.dtype, e.dtype)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_array_equal(a, e)


def both(fn):
    """fn eagerly and under jit."""
    return {"eager": fn, "jit": jax.jit(fn)}


def queries(rng, n, dtype):
    if np.dtype(dtype).kind == "f":
        v = rng.normal(size=n).astype(dtype)
        v[::97] = np.nan
        return v
    return rng.integers(-1000, 1000, size=n).astype(dtype)


def sorted_values(rng, n, dtype, nans=0):
    """Sorted, with runs of repeated values (ties for both sides) and `nans` NaNs last."""
    if np.dtype(dtype).kind == "f":
        a = np.round(rng.normal(size=n), 2).astype(dtype)
        a[: min(nans, n)] = np.nan
    else:
        a = rng.integers(-1000, 1000, size=n).astype(dtype)
    return np.sort(a)


def with_hits(v, a):
    """Queries equal to elements of `a` too (where the sides differ)."""
    v = v.copy()
    v[1::13] = a[rng_index(len(v[1::13]), len(a))]
    return v


def rng_index(count, n):
    return np.random.default_rng(1).integers(0, n, size=count)


# -- the sorted array in memory, queries on disk: blocks of the queries -------------------


@pytest.mark.parametrize(
    "budget, side, dtype",
    [("16KB", "left", np.float32), ("64KB", "right", np.float32), ("16KB", "right", np.int32)],
)
def test_queries_on_disk_as_jnp(budget_of, rng, budget, side, dtype):
    budget_of(budget)
    a = sorted_values(rng, 300, dtype, nans=3)
    v = with_hits(queries(rng, N_QUERIES, dtype), a)
    expected = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
    dv = disk(v)
    for mode, fn in both(lambda a, v: jnp.searchsorted(a, v, side=side)).items():
        found = fn(jnp.asarray(a), dv)
        assert isinstance(found, jask.DiskArray), mode  # larger than the budget
        check_exact(found, expected)


@pytest.mark.parametrize("method", ["compare_all", "sort"])
def test_other_methods_of_jnp(budget_of, rng, method):
    budget_of("16KB")
    a = sorted_values(rng, 64, np.float32, nans=2)
    v = with_hits(queries(rng, 10_007, np.float32), a)
    expected = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side="right", method=method)
    dv = disk(v)
    for fn in both(lambda a, v: jnp.searchsorted(a, v, side="right", method=method)).values():
        check_exact(fn(jnp.asarray(a), dv), expected)


def test_query_shapes_and_sorter_as_jnp(budget_of, rng):
    budget_of("16KB")
    unsorted = rng.normal(size=257).astype(np.float32)
    v = queries(rng, 2 * 5_003, np.float32).reshape(2, 5_003)
    sorter = jnp.argsort(unsorted)
    expected = jnp.searchsorted(jnp.asarray(unsorted), jnp.asarray(v), sorter=sorter)
    for fn in both(lambda a, v, s: jnp.searchsorted(a, v, sorter=s)).values():
        check_exact(fn(jnp.asarray(unsorted), disk(v), sorter), expected)
    # a 0-d DiskArray query: an in-memory 0-d result
    found = jnp.searchsorted(jnp.asarray(unsorted[sorter]), disk(np.float32(0.25)))
    check_exact(found, jnp.searchsorted(unsorted[np.asarray(sorter)], np.float32(0.25)))


def test_small_operands_are_searched_in_memory(rng):
    a, v = sorted_values(rng, 50, np.float32), queries(rng, 200, np.float32)
    for fn in both(jnp.searchsorted).values():
        found = fn(disk(a), disk(v))
        assert not isinstance(found, jask.DiskArray)
        check_exact(found, jnp.searchsorted(a, v))


# -- the sorted array on disk, larger than the budget -----------------------------------


@pytest.mark.parametrize(
    "budget, side, dtype", [("16KB", "left", np.float32), ("64KB", "right", np.int32)]
)
def test_sorted_array_on_disk_queries_in_memory(budget_of, rng, budget, side, dtype):
    budget_of(budget)
    a = sorted_values(rng, 50_001, dtype, nans=40)
    v = with_hits(queries(rng, 2_003, dtype), a)
    v[:3] = [a[0], a[-1], a[20_000]]
    expected = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
    da = disk(a)
    for fn in both(lambda a, v: jnp.searchsorted(a, v, side=side)).values():
        found = fn(da, jnp.asarray(v))
        assert not isinstance(found, jask.DiskArray)  # in-memory queries: in memory
        check_exact(found, expected)


def test_sorted_array_and_queries_on_disk(budget_of, rng):
    budget_of("16KB")
    side = "right"
    a = sorted_values(rng, 10_007, np.float32, nans=5)
    v = with_hits(queries(rng, 3_001, np.float32), a)
    expected = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
    da, dv = disk(a), disk(v)
    for fn in both(lambda a, v: jnp.searchsorted(a, v, side=side)).values():
        found = fn(da, dv)
        assert isinstance(found, jask.DiskArray)
        check_exact(found, expected)


def test_sorted_queries_read_only_the_blocks_they_fall_in(budget_of, rng):
    """Each block of sorted queries reads the one or two blocks of `a` its values fall in
    (found from a[::W]), not all of `a`."""
    budget_of("64KB")
    a = sorted_values(rng, 200_003, np.float32)
    v = np.sort(queries(rng, N_QUERIES, np.float32))
    expected = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v))
    da, dv = disk(a), disk(v)
    for fn in both(jnp.searchsorted).values():
        with jask.stats() as s:
            found = fn(da, dv)
            check_exact(found, expected)
        read = s.ops["rows"].bytes_read
        assert read < 3 * (a.nbytes + v.nbytes), read  # all of `a` per block would be 25x


def test_sorted_array_without_room_for_its_block_starts(budget_of, rng):
    """At 1KB a[::W] does not fit beside a block: every block of `a` is read and the counts
    on each query's left added."""
    budget_of("1KB")
    side = "left"
    a = sorted_values(rng, 3_001, np.float32, nans=7)
    v = with_hits(queries(rng, 101, np.float32), a)
    expected = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side)
    da = disk(a)
    for fn in both(lambda a, v: jnp.searchsorted(a, v, side=side)).values():
        check_exact(fn(da, jnp.asarray(v)), expected)
        check_exact(fn(da, disk(v)), expected)


# -- the same checks and errors as jnp; nothing changes for jax.Arrays --------------------


@pytest.mark.parametrize("kwargs", [{"side": "middle"}, {"method": "bisect"}])
def test_errors_are_jnps(rng, kwargs):
    a, v = sorted_values(rng, 10, np.float32), queries(rng, 20, np.float32)
    with pytest.raises(ValueError) as expected:
        jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), **kwargs)
    for args in [(jnp.asarray(a), disk(v)), (disk(a), jnp.asarray(v))]:
        with pytest.raises(ValueError) as raised:
            jnp.searchsorted(*args, **kwargs)
        assert str(raised.value) == str(expected.value)
    with pytest.raises(ValueError, match="a should be 1-dimensional"):
        jnp.searchsorted(disk(np.zeros((2, 3), np.float32)), jnp.asarray(v))


def test_jax_arrays_take_jaxs_own_searchsorted(rng):
    """jnp.searchsorted of jax.Arrays traces to the same program with JAX's function put back."""
    a, v = jnp.asarray(sorted_values(rng, 10, np.float32)), jnp.asarray(queries(rng, 5, np.float32))

    def program():
        return _without_names(jax.make_jaxpr(lambda a, v: jnp.searchsorted(a, v, "right"))(a, v))

    patched = jax_hijax.searchsorted_via_expand
    ours = program()
    jax_hijax.searchsorted_via_expand = patched._jask_original
    try:
        jaxs = program()
    finally:
        jax_hijax.searchsorted_via_expand = patched
    assert ours == jaxs
    assert "searchsorted_of_disk_arrays" in jask._jax.compat.installed_patches()


def _without_names(jaxpr) -> str:
    """A jaxpr's text without the names of its jitted functions (and the indentation that
    follows their lengths)."""
    return re.sub(r"\s+", " ", re.sub(r"name=\w+", "", str(jaxpr)))


# -- derivatives: zero through searchsorted, jnp's elsewhere ----------------------------


def test_grad_through_searchsorted_is_zero_there(budget_of, rng):
    budget_of("16KB")
    a = sorted_values(rng, 100, np.float32)
    v = rng.normal(size=20_011).astype(np.float32)

    def f(v):
        return jnp.sum(v * jnp.searchsorted(jnp.asarray(a), v).astype(jnp.float32))

    expected = jax.grad(f)(jnp.asarray(v))
    for fn in both(jax.grad(f)).values():
        g = fn(disk(v))
        assert isinstance(g, jask.DiskArray)
        check_exact(g, expected)


def test_grad_of_interp(budget_of, rng):
    budget_of("16KB")
    xp = np.sort(rng.uniform(0, 10, size=200)).astype(np.float32)
    fp = np.sin(xp).astype(np.float32)
    x = rng.uniform(-1, 11, size=10_007).astype(np.float32)

    def loss(fp, x):
        return jnp.sum(jnp.interp(x, jnp.asarray(xp), fp) ** 2)

    expected = jax.grad(loss, argnums=(0, 1))(jnp.asarray(fp), jnp.asarray(x))
    dx = disk(x)
    for fn in both(jax.grad(loss, argnums=(0, 1))).values():
        g_fp, g_x = fn(jnp.asarray(fp), dx)
        assert isinstance(g_x, jask.DiskArray)
        assert value(g_fp).dtype == expected[0].dtype
        assert_close(g_fp, expected[0], rtol=1e-4)
        assert value(g_x).dtype == expected[1].dtype
        assert_close(g_x, expected[1], rtol=1e-4)


# -- the jax.numpy functions written with searchsorted ----------------------------------


@pytest.mark.parametrize(
    "budget, right, order", [("16KB", False, "increasing"), ("64KB", True, "decreasing")]
)
def test_digitize_as_jnp(budget_of, rng, budget, right, order):
    budget_of(budget)
    bins = np.sort(rng.normal(size=40).astype(np.float32))
    bins = bins if order == "increasing" else bins[::-1].copy()
    x = with_hits(queries(rng, N_SMALLER, np.float32), bins)
    expected = jnp.digitize(jnp.asarray(x), jnp.asarray(bins), right=right)
    for fn in both(lambda x, b: jnp.digitize(x, b, right=right)).values():
        check_exact(fn(disk(x), jnp.asarray(bins)), expected)


def test_histogram_as_jnp(budget_of, rng):
    """Values and dtypes as jnp's; the searchsorted and the bincount stream in blocks of the
    budget: engine calls scale with the blocks, not with the bins or the binary search's
    steps (a few passes of the data, each a call per block)."""
    budget_of("64KB")
    x = rng.normal(size=N_QUERIES).astype(np.float32)
    counts, expected_edges = jnp.histogram(jnp.asarray(x), 300)
    dx = disk(x)
    blocks = -(-x.nbytes // (jask.memory_budget() // 2))  # blocks of the allowance
    for fn in both(lambda x: jnp.histogram(x, 300)).values():
        with jask.stats() as s:
            c, e = fn(dx)
            check_exact(c, counts)  # counts of ones: exact in float32
        assert value(e).dtype == expected_edges.dtype
        assert_close(e, expected_edges)
        assert s.total.calls <= 12 * blocks + 20, s.total.calls


def test_weighted_density_histogram_as_jnp(budget_of, rng):
    budget_of("16KB")
    x = rng.normal(size=N_SMALLER).astype(np.float32)
    w = rng.uniform(size=N_SMALLER).astype(np.float32)
    edges = jnp.linspace(-3, 3, 31)
    expected, _ = jnp.histogram(jnp.asarray(x), edges, weights=jnp.asarray(w), density=True)
    dx, dw = disk(x), disk(w)
    for fn in both(lambda x, w: jnp.histogram(x, edges, weights=w, density=True)).values():
        found, _ = fn(dx, dw)
        assert value(found).dtype == expected.dtype
        assert_close(found, expected, rtol=1e-4)  # blocks' sums added in another order


@pytest.mark.parametrize("budget, weighted", [("16KB", False), ("64KB", True)])
def test_bincount_as_jnp(budget_of, rng, budget, weighted):
    budget_of(budget)
    x = rng.integers(-3, 300, size=N_QUERIES).astype(np.int32)
    w = rng.uniform(size=N_QUERIES).astype(np.float32) if weighted else None
    expected = jnp.bincount(jnp.asarray(x), None if w is None else jnp.asarray(w), length=290)
    dx, dw = disk(x), None if w is None else disk(w)
    for fn in both(lambda x, w: jnp.bincount(x, w, length=290)).values():
        found = fn(dx, dw)
        if weighted:
            assert value(found).dtype == expected.dtype
            assert_close(found, expected, rtol=1e-4)
        else:
            check_exact(found, expected)


@pytest.mark.parametrize("budget, ends", [("16KB", "values"), ("64KB", "extrapolate")])
def test_interp_as_jnp(budget_of, rng, budget, ends):
    budget_of(budget)
    xp = np.sort(rng.uniform(0, 10, size=120)).astype(np.float32)
    fp = rng.normal(size=120).astype(np.float32)
    x = rng.uniform(-1, 11, size=N_SMALLER).astype(np.float32)
    x[::89] = np.nan
    x[1::89] = xp[7]
    kwargs = {"default": {}, "values": {"left": -5.0, "right": 7.0}}.get(
        ends, {"left": "extrapolate", "right": "extrapolate"}
    )
    expected = jnp.interp(jnp.asarray(x), jnp.asarray(xp), jnp.asarray(fp), **kwargs)
    for fn in both(lambda x: jnp.interp(x, jnp.asarray(xp), jnp.asarray(fp), **kwargs)).values():
        found = fn(disk(x))
        assert value(found).dtype == expected.dtype
        np.testing.assert_allclose(value(found), expected, rtol=1e-6, atol=1e-6)
