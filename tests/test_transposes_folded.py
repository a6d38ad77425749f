"""Transposes folded into matrix products under jit (jask/lowering/transposes.py): `x @ w.T`
of a DiskArray w reads w as stored, in the forward pass and in its gradient (a tied
embedding). Values against the same function on jax.Arrays; the engine's own count of its
calls (`jask.stats`) shows no transpose was written."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import assert_close


@pytest.fixture
def budget_16kb(small_budget):
    small_budget("16KB")


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def check(actual, expected, rtol=1e-5):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        assert_close(a, e, rtol=rtol)


def run(fn, *args):
    """fn(*args) jitted, and the engine calls it made (op name -> calls)."""
    with jask.stats() as s:
        out = jax.jit(fn)(*args)
        jax.block_until_ready(jax.tree.map(lambda x: x, out))
    return out, {name: o.calls for name, o in s.ops.items()}


def test_a_tied_embedding_step_writes_no_transpose(rng, budget_16kb):
    v, d, n = 1003, 37, 29  # the table 145 KiB: many blocks at 16 KB
    w = (rng.normal(size=(v, d)) / 6).astype(np.float32)
    h = rng.normal(size=(n, d)).astype(np.float32)  # the last hidden states, in memory
    y = rng.integers(0, v, size=n)

    def loss(w, h):
        logits = h @ w.T
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(n), y])

    step = jax.value_and_grad(loss, argnums=(0, 1))
    (value, grads), calls = run(step, disk(w), jnp.asarray(h))
    expected = step(jnp.asarray(w), jnp.asarray(h))
    check(value, expected[0])
    assert isinstance(grads[0], jask.DiskArray)
    check(grads, expected[1], rtol=1e-4)
    assert "transpose" not in calls, calls
    assert calls.get("matmul", 0) >= 2  # the logits and w's gradient, each reading w as stored


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a.T @ b,  # the left operand transposed
        lambda a, b: (a.T @ b).T,  # a transposed product: the operands swapped
        lambda a, b: jnp.sum((b.T @ a) ** 2),
        lambda a, b: (a.T @ b, a.T),  # the transpose also a result: it stays
    ],
    ids=["left", "transposed_product", "reduced", "transpose_kept"],
)
def test_products_of_transposed_diskarrays(rng, budget_16kb, fn):
    a = rng.normal(size=(301, 17)).astype(np.float32)
    b = rng.normal(size=(301, 13)).astype(np.float32)
    out, calls = run(fn, disk(a), disk(b))
    check(out, fn(jnp.asarray(a), jnp.asarray(b)), rtol=1e-4)
    assert calls.get("transpose", 0) == (1 if isinstance(out, tuple) else 0), calls
    grad = jax.grad(lambda a, b: jnp.sum(jnp.tanh(jax.tree.leaves(fn(a, b))[0])), (0, 1))
    got, calls = run(grad, disk(a), disk(b))
    check(got, grad(jnp.asarray(a), jnp.asarray(b)), rtol=1e-4)
    if not isinstance(out, tuple):
        assert "transpose" not in calls, calls


def test_hidden_states_of_a_batch_times_a_transposed_table(rng, budget_16kb):
    w = rng.normal(size=(1003, 37)).astype(np.float32)
    h = rng.normal(size=(2, 29, 37)).astype(np.float32)
    loss = lambda w, h: jnp.sum(jnp.tanh(h @ w.T))  # noqa: E731
    grad = jax.grad(loss, (0, 1))
    got, calls = run(grad, disk(w), jnp.asarray(h))
    check(got, grad(jnp.asarray(w), jnp.asarray(h)), rtol=1e-4)
    assert "transpose" not in calls, calls


def test_a_batched_product_of_a_transposed_stack(rng, budget_16kb):
    a = rng.normal(size=(3, 101, 7)).astype(np.float32)
    b = rng.normal(size=(3, 101, 5)).astype(np.float32)
    fn = lambda a, b: jnp.swapaxes(a, -1, -2) @ b  # noqa: E731
    out, calls = run(fn, disk(a), disk(b))
    check(out, fn(jnp.asarray(a), jnp.asarray(b)), rtol=1e-4)
    assert "transpose" not in calls, calls
