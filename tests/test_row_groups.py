"""Under jit, row-local ops over tall arrays (products with small matrices, elementwise ops,
sums, products of two tall arrays over their rows) run as one pass over row blocks."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _engine

from conftest import assert_close

N, D, H, OUT = 1237, 29, 11, 3  # rows not a multiple of any block


def kernels(fn, *args):
    """The engine kernels a jitted `fn` calls, as "kernel/label" where the call has a label."""
    calls = re.findall(
        r'kernel = "([^"]+)"(?:, label = "([^"]+)")?', jax.jit(fn).lower(*args).as_text()
    )
    return [f"{kernel}/{label}" if label else kernel for kernel, label in calls]


def seed_loss(a, b, c, t):
    return jask.sum(jask.square(jask.dot(jask.dot(a, b), c) - t))


def seed_ref(a, b, c, t):
    return jnp.sum(jnp.square(a @ b @ c - t))


@pytest.fixture
def seed(rng):
    dense = [rng.uniform(-1, 1, s).astype(np.float32) for s in [(N, D), (D, H), (H, OUT), (N, OUT)]]
    return dense, [jask.DiskArray.from_numpy(x) for x in dense]


def test_seed_gradient_is_one_pass_over_the_tall_arrays(seed, small_budget):
    small_budget("256KB")
    dense, disk = seed
    grad_fn = jax.value_and_grad(seed_loss, argnums=(0, 1, 2))
    (kernel,) = kernels(grad_fn, *disk)
    assert kernel.startswith("row_group/")
    io_before = sum(_engine.io_counters())
    value, grads = jax.jit(grad_fn)(*disk)
    moved = sum(_engine.io_counters()) - io_before
    a, b, c, t = (x.nbytes for x in dense)
    minimal = a + t + b + c + a + b + c  # read a, t (and b, c) once; write da, db, dc
    assert minimal <= moved <= minimal + 8 * 4096  # plus .npy headers and page-rounded edges
    ref_value, ref_grads = jax.value_and_grad(seed_ref, argnums=(0, 1, 2))(*dense)
    assert_close(value, ref_value)
    for g, e in zip(grads, ref_grads):
        assert isinstance(g, jask.DiskArray)
        assert_close(np.asarray(g), e)


@pytest.mark.parametrize("budget_text", ["4KB", "16KB", "1GB"])
def test_any_budget_gives_the_same_results(seed, small_budget, budget_text):
    """Below what one pass needs (the small matrices whole, a few rows of everything) the
    engine runs the group's ops one by one; the results are the same."""
    small_budget(budget_text)
    dense, disk = seed
    grad_fn = jax.jit(jax.value_and_grad(seed_loss, argnums=(0, 1, 2, 3)))
    value, grads = grad_fn(*disk)
    ref_value, ref_grads = jax.value_and_grad(seed_ref, argnums=(0, 1, 2, 3))(*dense)
    assert_close(value, ref_value)
    for g, e in zip(grads, ref_grads):
        assert_close(np.asarray(g), e)


def test_mlp_training_step_on_a_tall_dataset(rng, small_budget):
    """A two-layer network's loss and weight gradients over data on disk, against jnp."""
    small_budget("512KB")
    x_np = rng.uniform(-1, 1, (N, D)).astype(np.float32)
    y_np = rng.uniform(-1, 1, (N, OUT)).astype(np.float32)
    w1_np = rng.uniform(-0.5, 0.5, (D, H)).astype(np.float32)
    w2_np = rng.uniform(-0.5, 0.5, (H, OUT)).astype(np.float32)
    x, y, w1, w2 = (jask.DiskArray.from_numpy(v) for v in (x_np, y_np, w1_np, w2_np))

    def loss(w1, w2, x, y):
        return jnp.mean(jnp.square(jnp.tanh(x @ w1) @ w2 - y))

    grad_fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    assert any(
        k.startswith("row_group/")
        for k in kernels(jax.value_and_grad(loss, argnums=(0, 1)), w1, w2, x, y)
    )
    value, (g1, g2) = grad_fn(w1, w2, x, y)
    ref_value, (r1, r2) = jax.value_and_grad(loss, argnums=(0, 1))(w1_np, w2_np, x_np, y_np)
    assert_close(value, ref_value)
    assert_close(np.asarray(g1), r1)
    assert_close(np.asarray(g2), r2)


def test_a_result_read_before_the_group_ends_stays_outside(rng):
    """An op outside the group that reads a group result early splits the group; results hold."""
    a_np = rng.uniform(-1, 1, (N, D)).astype(np.float32)
    b_np = rng.uniform(-1, 1, (D, H)).astype(np.float32)
    a, b = jask.DiskArray.from_numpy(a_np), jask.DiskArray.from_numpy(b_np)

    def f(a, b):
        h = a @ b
        m = jask.max(h)  # not row-local: reads h before the next ops
        return jask.sum(jnp.tanh(h) * m), jask.dot(jnp.exp(h * 0.1), b.T)

    total, back = jax.jit(f)(a, b)
    h = a_np @ b_np
    assert_close(total, np.sum(np.tanh(h) * h.max()))
    assert_close(np.asarray(back), np.exp(h * 0.1) @ b_np.T)


def test_float64_groups(rng):
    jax.config.update("jax_enable_x64", True)
    try:
        dense = [rng.uniform(-1, 1, s) for s in [(N, D), (D, H), (H, OUT), (N, OUT)]]
        disk = [jask.DiskArray.from_numpy(x) for x in dense]
        value, grads = jax.jit(jax.value_and_grad(seed_loss, argnums=(0, 1)))(*disk)
        ref_value, ref_grads = jax.value_and_grad(seed_ref, argnums=(0, 1))(*dense)
        assert_close(value, ref_value)
        for g, e in zip(grads, ref_grads):
            assert np.asarray(g).dtype == np.float64
            assert_close(np.asarray(g), e)
    finally:
        jax.config.update("jax_enable_x64", False)
