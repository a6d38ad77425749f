"""jax.lax.scan over a DiskArray's leading axis (xs): the body sees one slice at a time, in
memory, as for a jax.Array; results and gradients match jax.lax.scan over the same values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

RNG = np.random.default_rng(14)
W = (RNG.standard_normal((5, 33, 33)) / 6).astype(np.float32)  # 5 layers, not a block multiple
H0 = RNG.standard_normal((7, 33)).astype(np.float32)
XS = RNG.standard_normal((5, 33)).astype(np.float32)


@pytest.fixture(autouse=True)
def small_budget():
    before = jask.memory_budget()
    jask.set_memory_budget(1 << 16)  # 64 KiB: a layer (4.3 KiB) per block, many blocks per call
    yield
    jask.set_memory_budget(before)


def layers(h, w, reverse=False):
    def body(h, w):
        h = jax.nn.relu(h @ w)
        return h, jnp.sum(h, axis=1)

    return jax.lax.scan(body, h, w, reverse=reverse)


def assert_tree_close(got, want):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert not isinstance(a, jask.DiskArray)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("jit", [False, True])
def test_a_scan_over_layers_on_disk(reverse, jit):
    f = jax.jit(layers, static_argnums=2) if jit else layers
    got = f(H0, jask.DiskArray.from_numpy(W), reverse)
    assert_tree_close(got, layers(H0, jnp.asarray(W), reverse))


def test_disk_and_in_memory_xs_together():
    def f(h, w, xs):
        return jax.lax.scan(lambda h, wx: (jnp.tanh(h @ wx[0] + wx[1]), wx[1].sum()), h, (w, xs))

    got = jax.jit(f)(H0, jask.DiskArray.from_numpy(W), XS)
    assert_tree_close(got, f(H0, jnp.asarray(W), XS))


def test_gradients_through_a_scan_over_disk():
    def loss(h, w):
        return jnp.sum(layers(h, w)[0] ** 2)

    wd = jask.DiskArray.from_numpy(W)
    gh, gw = jax.grad(loss, argnums=(0, 1))(H0, wd)
    want_h, want_w = jax.grad(loss, argnums=(0, 1))(H0, jnp.asarray(W))
    assert isinstance(gw, jask.DiskArray) and gw.dtype == np.float32
    np.testing.assert_allclose(np.asarray(gh), want_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gw), want_w, rtol=1e-4, atol=1e-5)


def test_xs_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match=r"different leading axis sizes.*disk:float32\[5,33,33\]"):
        jax.lax.scan(lambda c, x: (c, None), 0.0, (jask.DiskArray.from_numpy(W), XS[:4]))


def test_a_bodys_diskarray_outputs_are_stacked_in_memory_within_the_budget():
    # a small product of DiskArrays is a DiskArray (an RNN's output from weights on disk): the
    # ys JAX stacks in memory get its values; one larger than the budget is refused by name
    ones = np.ones(3, np.float32)

    def body(c, x):
        return c, jask.DiskArray.from_numpy(ones) * x[0, 0]

    for scan in (jax.lax.scan, jax.jit(jax.lax.scan, static_argnums=0)):
        _, ys = scan(body, 0.0, jask.DiskArray.from_numpy(W))
        _, want = jax.lax.scan(lambda c, x: (c, jnp.asarray(ones) * x[0, 0]), 0.0, jnp.asarray(W))
        assert not isinstance(ys, jask.DiskArray) and ys.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(ys), np.asarray(want))
    big = jask.DiskArray.from_numpy(np.ones(20_000, np.float32))  # 80 KB: over the 64 KiB
    with pytest.raises(ValueError, match=r"jax.lax.scan body's output.*float32\[20000\]"):
        jax.lax.scan(lambda c, x: (c, big * x[0, 0]), 0.0, jask.DiskArray.from_numpy(W))
