"""optax.sgd on DiskArray parameters, eagerly and under jit, against the same optimizer on jnp arrays."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jask

from conftest import assert_close


def loss(w, x, y):
    return jask.sum(jask.square(jask.dot(x, w) - y))


def ref_loss(w, x, y):
    return jnp.sum(jnp.square(x @ w - y))


@pytest.mark.parametrize("jit_update", [False, True], ids=["eager_update", "jit_update"])
def test_sgd_matches_in_memory_training(jit_update, budget, rng):
    x_np = rng.uniform(-1, 1, (301, 13)).astype(np.float32)
    y_np = rng.uniform(-1, 1, (301, 3)).astype(np.float32)
    w_np = rng.uniform(-1, 1, (13, 3)).astype(np.float32)
    x, y, w = (jask.DiskArray.from_numpy(v) for v in (x_np, y_np, w_np))
    opt = optax.sgd(0.002)
    update = jax.jit(opt.update) if jit_update else opt.update
    grad_fn = jax.jit(jax.value_and_grad(loss))
    state, ref_state, ref_w = opt.init(w), opt.init(w_np), jnp.asarray(w_np)
    for _ in range(4):
        value, g = grad_fn(w, x, y)
        ref_value, ref_g = jax.value_and_grad(ref_loss)(ref_w, x_np, y_np)
        assert_close(value, ref_value)
        updates, state = update(g, state)
        assert isinstance(updates, jask.DiskArray)
        w = w.update_(w + updates)
        ref_updates, ref_state = opt.update(ref_g, ref_state)
        ref_w = optax.apply_updates(ref_w, ref_updates)
    assert_close(np.asarray(w), ref_w)
