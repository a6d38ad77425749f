"""jax.vmap over functions of DiskArrays: each Jask op runs once on the whole batch (or in one
loop over it), results stacked on disk for DiskArray results, matching jax.numpy on in-memory
copies; the trace of a batch of 50 holds as many equations as that of a batch of 3."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import assert_close

M, K = 53, 19


@pytest.fixture
def data(rng):
    x_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    return x_np, jask.DiskArray.from_numpy(x_np)


def test_batched_scalar_with_an_unbatched_diskarray(data, budget):
    x_np, x = data
    s = jnp.linspace(-1.0, 2.0, 4)
    f = lambda s: jask.sum(jask.square(x * s - 0.5))  # noqa: E731
    expected = jax.vmap(lambda s: jnp.sum(jnp.square(x_np * s - 0.5)))(s)
    for fn in (jax.vmap(f), jax.jit(jax.vmap(f)), jax.vmap(jax.jit(f))):
        assert_close(fn(s), expected)


def test_batched_diskarray_results_are_stacked_on_disk(data):
    x_np, x = data
    bias = jnp.asarray(np.random.default_rng(3).uniform(-1, 1, (3, K)).astype(np.float32))
    for fn in (jax.vmap(lambda b: jnp.tanh(x + b)), jax.jit(jax.vmap(lambda b: jnp.tanh(x + b)))):
        out = fn(bias)
        assert isinstance(out, jask.DiskArray) and out.shape == (3, M, K)
        assert_close(np.asarray(out), np.tanh(x_np[None] + np.asarray(bias)[:, None, :]))


def test_ops_on_batched_intermediates(data):
    """Later ops receive the stacked DiskArray batched along axis 0 and slice it per element."""
    x_np, x = data
    s = jnp.asarray([0.5, -1.0, 2.0])
    f = lambda s: jnp.max(jnp.exp(x * s), axis=1) + jask.sum(x * s)  # noqa: E731
    ref = lambda s: jnp.max(jnp.exp(x_np * s), axis=1) + jnp.sum(x_np * s)  # noqa: E731
    assert_close(jax.vmap(f)(s), jax.vmap(ref)(s))
    assert_close(jax.jit(jax.vmap(f))(s), jax.vmap(ref)(s))


def test_in_axes_other_than_zero_and_a_batched_diskarray(data):
    x_np, x = data
    cols = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, (K, 2)).astype(np.float32))
    got = jax.vmap(lambda c: jask.sum(x * c), in_axes=1)(cols)
    assert_close(got, jax.vmap(lambda c: jnp.sum(x_np * c), in_axes=1)(cols))
    # a DiskArray mapped along its leading axis: one row per element
    assert_close(jax.vmap(lambda row: jask.sum(jask.square(row)))(x), np.sum(x_np**2, axis=1))


def test_per_example_gradients_of_a_batched_argument(data):
    x_np, x = data
    s = jnp.asarray([0.3, 1.7])
    loss = lambda x, s: jask.sum(jask.square(x * s))  # noqa: E731
    ref = lambda x, s: jnp.sum(jnp.square(x * s))  # noqa: E731
    expected = jax.vmap(jax.grad(ref, argnums=1), in_axes=(None, 0))(x_np, s)
    for fn in (
        jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0)),
        jax.jit(jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0))),
    ):
        assert_close(fn(x, s), expected)
    grads = jax.vmap(jax.grad(loss), in_axes=(None, 0))(
        x, s
    )  # gradient w.r.t. the DiskArray, per example
    assert isinstance(grads, jask.DiskArray) and grads.shape == (2, M, K)
    assert_close(np.asarray(grads), jax.vmap(jax.grad(ref), in_axes=(None, 0))(x_np, s))


def test_an_unbatched_diskarray_output_is_repeated_along_the_batch(data):
    x_np, x = data
    for fn in (jax.vmap(lambda s: (x, s * 2.0)), jax.jit(jax.vmap(lambda s: (x, s * 2.0)))):
        out, doubled = fn(jnp.arange(3.0))
        assert isinstance(out, jask.DiskArray) and out.shape == (3, M, K)
        assert_close(np.asarray(out), np.broadcast_to(x_np, (3, M, K)))
        assert_close(doubled, np.arange(3.0) * 2)
    out = jax.vmap(lambda s: x, out_axes=1)(jnp.arange(2.0))
    assert out.shape == (M, 2, K)
    assert_close(np.asarray(out), np.stack([x_np, x_np], axis=1))


def _disk_batches(f, *shapes, batches=(3, 50)):
    """The number of equations of jax.make_jaxpr(jax.vmap(f)) on DiskArrays of each batch size."""
    rng = np.random.default_rng(7)
    counts = []
    for n in batches:
        args = [
            jask.DiskArray.from_numpy(rng.uniform(-1, 1, (n, *s)).astype(np.float32))
            for s in shapes
        ]
        counts.append(len(jax.make_jaxpr(jax.vmap(f))(*args).eqns))
    return counts


def _check_vmap(f, *arrays, in_axes=0):
    """jax.vmap(f) and jax.jit(jax.vmap(f)) on DiskArrays against jax.vmap(f) on jax.Arrays:
    values, dtypes and shapes."""
    disk = [jask.DiskArray.from_numpy(a) for a in arrays]
    expected = jax.vmap(f, in_axes=in_axes)(*(jnp.asarray(a) for a in arrays))
    for fn in (jax.vmap(f, in_axes=in_axes), jax.jit(jax.vmap(f, in_axes=in_axes))):
        got = fn(*disk)
        for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype, (g, e)
            assert_close(np.asarray(g), np.asarray(e))


WHERE_CASES = {
    "scalar_case": lambda r: jnp.where(r > 0, r, -1e9),
    "both_batched": lambda r: jnp.where(r > 0.2, r, jnp.sin(r)),
    "unbatched_cond": lambda r: jnp.where(jnp.arange(K) % 2 == 0, r, 0.5),
    "unbatched_cases": lambda r: jnp.where(r > 0, jnp.arange(K, dtype=jnp.float32), -1.0),
    "select_n_int": lambda r: jax.lax.select_n(
        (r > 0).astype(jnp.int32) + (r > 0.5).astype(jnp.int32), r, 2 * r, -r
    ),
}


@pytest.mark.parametrize("case", list(WHERE_CASES))
def test_where_and_select_n_under_vmap(case, data, small_budget):
    small_budget("16KB")
    x_np, _ = data
    f = WHERE_CASES[case]
    _check_vmap(f, x_np)
    counts = _disk_batches(f, (K,))
    assert counts[0] == counts[1], counts


def test_where_gradient_under_vmap(data, small_budget):
    small_budget("16KB")
    x_np, x = data
    loss = lambda r: jnp.sum(jnp.where(r > 0, r * r, -r) ** 2)  # noqa: E731
    expected = jax.vmap(jax.grad(loss))(jnp.asarray(x_np))
    got = jax.vmap(jax.grad(loss))(x)
    assert isinstance(got, jask.DiskArray) and got.dtype == expected.dtype
    assert_close(np.asarray(got), expected)
    got = jax.grad(lambda x: jnp.sum(jax.vmap(loss)(x)))(x)
    assert_close(np.asarray(got), expected)


TRACE_CASES = {
    "reductions": (lambda r: jnp.sum(r, axis=0) * jnp.max(r) + jnp.mean(r), (6, 9)),
    "cumsum": (lambda r: jnp.cumsum(r, axis=1) - jnp.cumsum(r[::-1], axis=0), (6, 9)),
    "sort": (lambda r: jnp.sort(r, axis=-1)[:, 1:] + jnp.argsort(r, axis=0)[:, 1:], (6, 9)),
    "matmul": (lambda r: r @ r.T + jnp.linalg.norm(r), (6, 9)),
    "shapes": (lambda r: jnp.concatenate([r.T, r[::2].T], axis=1).reshape(-1)[3:40], (6, 9)),
    "pad": (lambda r: jnp.pad(r, ((1, 2), (0, 3)), constant_values=2.0) * 2.0, (6, 9)),
    "argmax": (lambda r: jnp.argmax(r, axis=1) + jnp.argmin(r, axis=0).sum(), (6, 9)),
}


@pytest.mark.parametrize("case", list(TRACE_CASES))
def test_vmap_of_ops_over_a_diskarray_does_not_unroll(case, small_budget):
    small_budget("16KB")
    f, shape = TRACE_CASES[case]
    counts = _disk_batches(f, shape)
    assert counts[0] == counts[1], counts
    x = np.random.default_rng(5).uniform(-1, 1, (11, *shape)).astype(np.float32)
    _check_vmap(f, x)


def test_vmap_gradient_through_reductions_and_matmul(small_budget):
    small_budget("16KB")
    x = np.random.default_rng(6).uniform(-1, 1, (5, 6, 9)).astype(np.float32)
    w = np.random.default_rng(7).uniform(-1, 1, (9, 4)).astype(np.float32)
    loss = lambda r, w: jnp.sum(jnp.tanh(r @ w) ** 2) + jnp.max(jnp.cumsum(r, axis=0))  # noqa: E731
    ref = jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(0, None))(x, w)
    disk = jask.DiskArray.from_numpy(x), jask.DiskArray.from_numpy(w)
    got = jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(0, None))(*disk)
    for g, e in zip(got, ref):
        assert isinstance(g, jask.DiskArray) and g.dtype == e.dtype
        assert_close(np.asarray(g), e)


def test_searchsorted_of_diskarray_queries(small_budget):
    small_budget("16KB")
    rng = np.random.default_rng(8)
    edges = np.sort(rng.uniform(-1, 1, 37)).astype(np.float32)
    queries = rng.uniform(-1.2, 1.2, (7, 41)).astype(np.float32)
    q = jask.DiskArray.from_numpy(queries)
    for side in ("left", "right"):
        expected = jnp.searchsorted(edges, queries, side=side)
        got = jnp.searchsorted(edges, q, side=side)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_array_equal(np.asarray(got), expected)
        f = functools.partial(jnp.searchsorted, edges, side=side)
        got = jax.vmap(f)(q)
        np.testing.assert_array_equal(np.asarray(got), jax.vmap(f)(queries))
    counts = _disk_batches(lambda q: jnp.searchsorted(edges, q), (41,))
    assert counts[0] == counts[1], counts


def test_an_op_without_a_batched_form_runs_in_one_loop(small_budget):
    """Rows of a batched DiskArray (a take from it): the op runs in a loop over the batch;
    rows of an unbatched one at batched indices are one take of all of them."""
    small_budget("16KB")
    x_np = np.random.default_rng(9).uniform(-1, 1, (4, 13, 5)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    idx = np.asarray([[3, 0, 12, 3], [1, 1, 2, 0], [7, 8, 9, 10], [0, 12, 5, 5]])
    f = lambda r, i: jask.take(r, i, axis=0) * 2.0  # noqa: E731
    loss = lambda r: jnp.sum(jax.vmap(f)(r, jnp.asarray(idx)) ** 2)  # noqa: E731
    expected = np.stack([x_np[b][idx[b]] for b in range(4)]) * 2.0
    want = jax.grad(lambda r: jnp.sum(jax.vmap(f)(r, jnp.asarray(idx)) ** 2))(jnp.asarray(x_np))
    for fn in (jax.vmap(f), jax.jit(jax.vmap(f))):
        assert_close(np.asarray(fn(x, jnp.asarray(idx))), expected)
    for grad in (jax.grad(loss), jax.jit(jax.grad(loss))):
        got = grad(x)
        assert isinstance(got, jask.DiskArray)
        assert_close(np.asarray(got), want)
    rows = jask.DiskArray.from_numpy(x_np[1])
    unbatched = jax.vmap(lambda i: jask.take(rows, i, axis=0))(jnp.asarray(idx))
    assert_close(np.asarray(unbatched), x_np[1][idx])
    counts = _disk_batches(lambda r: jask.take(r, jnp.asarray(idx[0]), axis=0), (13, 5))
    assert counts[0] == counts[1], counts


def test_filled_diskarrays_of_batched_values(data, small_budget):
    small_budget("16KB")
    x_np, x = data
    s = jnp.asarray([1.5, -2.0, 3.0], jnp.float32)
    for f in (lambda s: jnp.full_like(x, s), lambda s: jask.full((M, K), s)):
        out = jax.vmap(f)(s)
        assert isinstance(out, jask.DiskArray) and out.shape == (3, M, K)
        assert out.dtype == np.float32
        assert_close(np.asarray(out), np.broadcast_to(np.asarray(s)[:, None, None], (3, M, K)))
    counts = _disk_batches(lambda r: jnp.full_like(x, r[0]) * r[1], (K,))
    assert counts[0] == counts[1], counts
