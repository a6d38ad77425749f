"""jax.vmap over functions of DiskArrays: each Jask op runs once per batch element and the
results are stacked (on disk for DiskArray results), matching jax.numpy on in-memory copies."""

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
