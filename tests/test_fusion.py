"""Under jit, chains of elementwise ops run as one pass over the data."""

import re

import jax
import jax.numpy as jnp
import numpy as np

import jask
from jask import _engine
from conftest import assert_close


def kernels(fn, *args):
    text = jax.jit(fn).lower(*args).as_text()
    return re.findall(r'kernel = "([^"]+)"', text)


def test_reduction_chain_is_one_pass(rng, small_budget):
    small_budget("64KB")
    x_np, y_np = (rng.uniform(-1, 1, (401, 97)).astype(np.float32) for _ in range(2))
    x, y = jask.DiskArray.from_numpy(x_np), jask.DiskArray.from_numpy(y_np)
    loss = lambda x, y: jask.sum(jask.square(x - y))  # noqa: E731
    assert kernels(loss, x, y) == ["map_reduce/sub+square+sum"]
    io_before = sum(_engine.io_counters())
    value = jax.jit(loss)(x, y)
    assert sum(_engine.io_counters()) - io_before == x.nbytes + y.nbytes  # read once, nothing written
    assert_close(value, np.sum((x_np - y_np) ** 2))


def test_map_chain_writes_only_its_result(rng):
    x_np, y_np = (rng.uniform(-1, 1, (301, 57)).astype(np.float32) for _ in range(2))
    x, y = jask.DiskArray.from_numpy(x_np), jask.DiskArray.from_numpy(y_np)
    axpy = lambda x, y: 2.5 * x + y  # noqa: E731
    assert kernels(axpy, x, y) == ["map/mul+add"]
    assert_close(np.asarray(jax.jit(axpy)(x, y)), 2.5 * x_np + y_np)


def test_repeated_operand_is_read_once(rng):
    x = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (64, 33)).astype(np.float32))
    text = jax.jit(lambda x: x * x + x).lower(x).as_text()
    assert 'kernel = "map/mul+add", num_handles = 1' in text


def test_shared_intermediates_and_other_dtypes_are_not_fused(rng):
    x_np = rng.uniform(0.5, 1, (50, 7)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    shared = lambda x: jask.vdot(jnp.sqrt(x), jnp.sqrt(x) + 1.0)  # noqa: E731
    assert_close(jax.jit(shared)(x), np.vdot(np.sqrt(x_np), np.sqrt(x_np) + 1))
    half = lambda x: x.astype(jnp.float16) * 3.0  # noqa: E731
    assert kernels(half, x) == ["map/astype", "map/mul"]  # float16 rounding between the two


def test_adam_step_fuses_its_elementwise_math(rng):
    import optax
    w = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (40, 9)).astype(np.float32))
    opt = optax.adam(0.01)
    state = opt.init(w)
    step = lambda g, s, w: optax.apply_updates(w, opt.update(g, s, w)[0])  # noqa: E731
    assert len(kernels(step, w, state, w)) <= 4
