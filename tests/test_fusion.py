"""Under jit, chains of elementwise ops run as one pass over the data."""

import re

import jax
import jax.numpy as jnp
import numpy as np

import jask
from jask import _engine

from conftest import assert_close


def kernels(fn, *args):
    """The engine kernels a jitted `fn` calls, as "kernel/label" where the call has a label."""
    text = jax.jit(fn).lower(*args).as_text()
    calls = re.findall(r'kernel = "([^"]+)"(?:, label = "([^"]+)")?', text)
    return [f"{kernel}/{label}" if label else kernel for kernel, label in calls]


def test_reduction_chain_is_one_pass(rng, small_budget):
    small_budget("64KB")
    x_np, y_np = (rng.uniform(-1, 1, (401, 97)).astype(np.float32) for _ in range(2))
    x, y = jask.DiskArray.from_numpy(x_np), jask.DiskArray.from_numpy(y_np)
    loss = lambda x, y: jask.sum(jask.square(x - y))  # noqa: E731
    assert kernels(loss, x, y) == ["map_reduce/sub+square+sum"]
    io_before = sum(_engine.io_counters())
    value = jax.jit(loss)(x, y)
    assert (
        sum(_engine.io_counters()) - io_before == x.nbytes + y.nbytes
    )  # read once, nothing written
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
    assert 'kernel = "map", label = "mul+add"' in text and "num_handles = 1 :" in text


def test_shared_intermediates_are_not_fused_and_dtype_changes_are(rng):
    x_np = rng.uniform(0.5, 1, (50, 7)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    shared = lambda x: jask.vdot(jnp.sqrt(x), jnp.sqrt(x) + 1.0)  # noqa: E731
    assert_close(jax.jit(shared)(x), np.vdot(np.sqrt(x_np), np.sqrt(x_np) + 1))
    # registers hold float16 values rounded after each instruction, int32 ones in int32: a
    # fused pass computes what the ops one by one would
    half = lambda x: (x.astype(jnp.float16) * 3.3).astype(jnp.int32)  # noqa: E731
    assert kernels(half, x) == ["map/astype+mul+astype"]
    np.testing.assert_array_equal(np.asarray(jax.jit(half)(x)), np.asarray(half(jnp.asarray(x_np))))


def test_adam_step_fuses_its_elementwise_math(rng):
    import optax

    w = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (40, 9)).astype(np.float32))
    opt = optax.adam(0.01)
    state = opt.init(w)
    step = lambda g, s, w: optax.apply_updates(w, opt.update(g, s, w)[0])  # noqa: E731
    assert len(kernels(step, w, state, w)) <= 4


def test_whole_adam_step_is_one_pass_with_minimal_traffic(rng, small_budget):
    """New moments are both outputs and inputs of the update: one pass reads p, g, m, v once
    and writes p, m, v once."""
    import optax

    small_budget("64KB")
    p_np, g_np = (rng.uniform(-1, 1, (313, 101)).astype(np.float32) for _ in range(2))
    p, g = jask.DiskArray.from_numpy(p_np), jask.DiskArray.from_numpy(g_np)
    opt = optax.adam(0.01)

    def step(p, g, state):
        updates, state = opt.update(g, state, p)
        return optax.apply_updates(p, updates), state

    state = opt.init(p)
    (kernel,) = kernels(step, p, g, state)
    assert kernel.startswith("map_multi/")
    ref_p, ref_state = jnp.asarray(p_np), opt.init(jnp.asarray(p_np))
    for _ in range(3):
        io_before = sum(_engine.io_counters())
        p, state = jax.jit(step)(p, g, state)
        moved = sum(_engine.io_counters()) - io_before
        assert 7 * p.nbytes <= moved <= 7 * p.nbytes + 3 * 4096  # and a .npy header per result
        ref_p, ref_state = step(ref_p, jnp.asarray(g_np), ref_state)
    assert_close(np.asarray(p), ref_p)
    assert_close(np.asarray(state[0].mu), ref_state[0].mu)
    assert_close(np.asarray(state[0].nu), ref_state[0].nu)


def test_results_read_before_the_consumer_stay_separate(rng):
    """A result used by an op that runs before the consumer cannot move into the consumer."""
    x_np = rng.uniform(0.5, 1, (61, 17)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)

    def f(x):
        s = jnp.sqrt(x)
        total = jask.sum(s)  # reads s before the consumer below
        return s * 2.0 + 1.0, total

    out, total = jax.jit(f)(x)
    assert_close(np.asarray(out), np.sqrt(x_np) * 2 + 1)
    assert_close(total, np.sqrt(x_np).sum())

    def two(x):
        e = jnp.exp(x)
        return e, e * 3.0 - x

    assert [k.split("/")[0] for k in kernels(two, x)] == ["map_multi"]
    a, b = jax.jit(two)(x)
    assert_close(np.asarray(a), np.exp(x_np))
    assert_close(np.asarray(b), np.exp(x_np) * 3 - x_np)


def test_long_fused_chains_get_valid_file_names(rng):
    """A fused op's name lists its ops; its result file's name stays within the file system's limit."""
    x_np = rng.uniform(-1, 1, (33, 5)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)

    def chain(x):
        for _ in range(40):
            x = x * 1.01 + 0.01
        return x

    (kernel,) = kernels(chain, x)
    assert len(kernel) > 255
    assert_close(np.asarray(jax.jit(chain)(x)), chain(x_np))


def test_gradient_of_a_sum_is_not_written_out(rng):
    """The cotangent of sum(...) is a scalar broadcast; it joins the pass that uses it."""
    x_np = rng.uniform(-1, 1, (71, 13)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    loss = lambda x: jask.sum(jask.square(x))  # noqa: E731
    assert "fill" not in kernels(jax.grad(loss), x)
    assert_close(np.asarray(jax.jit(jax.grad(loss))(x)), 2 * x_np)
