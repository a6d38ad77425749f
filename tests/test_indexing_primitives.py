"""jax.lax.gather and the scatters on DiskArrays (jask/_api/indexing.py gather/scatter), in
the forms jax.numpy produces: jnp.take_along_axis along any axis, jnp.take on any axis, row
and column gathers, optax's integer-label cross entropy, jax.nn.one_hot of DiskArray labels,
and x.at[...].set/add/multiply/min/max at row indices, static slices and integers. Values and
dtypes against jax.numpy, eager and under jit, gradients and JVPs against jax.grad and
jax.jvp on jnp arrays, out-of-range indices as jnp treats them, small budgets."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import assert_close, jvp_reference

N, K = 97, 23
LABELS = np.random.default_rng(3).integers(0, K, N).astype(np.int32)
ROWS = np.array([3, 5, 5, -1, 0, N - 1, 60, 3], np.int32)  # duplicates and a negative
OUT_OF_RANGE = np.array([2, N + 5, -N - 3, 7], np.int32)
take = jnp.take
# windows of 5 along axis 1 at (row, column) starts: what jnp makes of x[i, j:j + 5]
WINDOWS = jax.lax.GatherDimensionNumbers(
    offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1)
)

GATHERS = {
    "take_along_last_axis": lambda x: jnp.take_along_axis(x, jnp.asarray(LABELS)[:, None], -1),
    "take_along_axis_0": lambda x: jnp.take_along_axis(
        x, jnp.asarray(LABELS[:K] * 4 % N)[None, :], axis=0
    ),
    "take_along_axis_2d_indices": lambda x: jnp.take_along_axis(
        x, jnp.asarray(np.stack([LABELS, LABELS[::-1]], 1)), axis=1
    ),
    "rows": lambda x: take(x, jnp.asarray(ROWS), axis=0),
    "columns": lambda x: take(x, jnp.asarray(ROWS % K), axis=1),
    "take_2d_indices_axis_1": lambda x: take(x, jnp.asarray(ROWS.reshape(2, 4) % K), axis=1),
    "take_clip": lambda x: take(x, jnp.asarray(OUT_OF_RANGE), axis=0, mode="clip"),
    "take_fill": lambda x: take(x, jnp.asarray(OUT_OF_RANGE), axis=0, mode="fill", fill_value=-2.0),
    "take_flat": lambda x: take(x, jnp.asarray(ROWS * 7 % (N * K))),
    "wide_windows_clamped": lambda x: jax.lax.gather(
        x,
        jnp.asarray([[3, 2], [90, 20], [-1, 4]]),
        WINDOWS,
        slice_sizes=(1, 5),
        mode="clip",
    ),
    "wide_windows_filled": lambda x: jax.lax.gather(
        x, jnp.asarray([[3, 2], [90, 20], [5, 18]]), WINDOWS, slice_sizes=(1, 5), mode="fill"
    ),
    "along_out_of_range_fills_nan": lambda x: jnp.take_along_axis(
        x, jnp.asarray(LABELS * 2)[:, None], -1
    ),
}


@pytest.fixture
def data(rng):
    x = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    return x, jask.DiskArray.from_numpy(x)


def assert_same(out, expected):
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", GATHERS)
def test_gathers_values_grads_and_jvp(name, data, rng, small_budget):
    small_budget("4KB")
    fn = GATHERS[name]
    x_np, x = data
    expected = fn(jnp.asarray(x_np))
    for f in (fn, jax.jit(fn)):
        assert_same(f(x), expected)
    if np.isnan(np.asarray(expected)).any():
        return
    w = jnp.asarray(rng.uniform(-1, 1, expected.shape).astype(np.float32))

    def loss(x):
        return jnp.sum(jnp.sin(fn(x)) * w)

    want = jax.jit(jax.grad(loss))(jnp.asarray(x_np))  # jitted: the reference compiles once
    for grad in (jax.grad(loss), jax.jit(jax.grad(loss))):
        g = grad(x)
        assert isinstance(g, jask.DiskArray)
        assert_close(np.asarray(g), want)
    t = rng.uniform(-1, 1, x_np.shape).astype(np.float32)
    _, t_want = jvp_reference(fn, jnp.asarray(x_np), jnp.asarray(t))
    t_disk = jask.DiskArray.from_numpy(t)  # held until the (asynchronous) result is read
    _, t_out = jax.jvp(fn, (x,), (t_disk,))
    assert_close(np.asarray(t_out), t_want)


def test_traced_indices_under_jit(data):
    x_np, x = data
    step = jax.jit(lambda x, idx: jnp.take_along_axis(x, idx[:, None], axis=1))
    for seed in range(2):
        idx = jax.random.randint(jax.random.key(seed), (N,), 0, K)
        assert_same(step(x, idx), step(jnp.asarray(x_np), idx))


def test_gather_result_on_disk(data, monkeypatch):
    x_np, x = data
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 0)
    idx = jnp.asarray(ROWS[:5] % K)  # a shape no other test traces jnp.take with
    out = take(x, idx, axis=1)
    assert isinstance(out, jask.DiskArray)
    assert_same(out, take(jnp.asarray(x_np), idx, axis=1))


def test_softmax_cross_entropy_with_integer_labels(data, small_budget):
    optax = pytest.importorskip("optax")
    small_budget("64KB")
    x_np, x = data
    labels = jnp.asarray(LABELS)

    def loss(logits):
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))

    assert_close(loss(x), loss(jnp.asarray(x_np)))
    assert_close(jax.jit(loss)(x), loss(jnp.asarray(x_np)))
    want = jax.jit(jax.grad(loss))(jnp.asarray(x_np))  # jitted: the reference compiles once
    for grad in (jax.grad(loss), jax.jit(jax.grad(loss))):
        assert_close(np.asarray(grad(x)), want)


def test_one_hot_of_disk_labels():
    labels = jask.DiskArray.from_numpy(LABELS)
    expected = jax.nn.one_hot(LABELS, K)
    for f in (lambda y: jax.nn.one_hot(y, K), jax.jit(lambda y: jax.nn.one_hot(y, K))):
        assert_same(f(labels), expected)


SCATTERS = {
    "set_rows": lambda x, u: x.at[jnp.asarray([1, 4, 90])].set(u[:3]),
    "set_rows_duplicates_last_wins": lambda x, u: x.at[jnp.asarray([1, 4, 4])].set(u[:3]),
    "add_rows_duplicates": lambda x, u: x.at[jnp.asarray(ROWS)].add(u[: len(ROWS)]),
    "multiply_rows": lambda x, u: x.at[jnp.asarray([1, 4, 9])].multiply(u[:3], unique_indices=True),
    "min_rows": lambda x, u: x.at[jnp.asarray([1, 4, 4])].min(u[:3]),
    "max_rows": lambda x, u: x.at[jnp.asarray([2, 8])].max(u[:2]),
    "set_slice": lambda x, u: x.at[2:7].set(u[:5]),
    "add_slice_scalar": lambda x, u: x.at[10:50].add(3.0),
    "max_slice": lambda x, u: x.at[2:5].max(0.25),
    "set_integer": lambda x, u: x.at[3].set(u[0]),
    "set_negative_integer": lambda x, u: x.at[-2].set(7.0),
    "add_column": lambda x, u: x.at[:, 2].add(u[:, 0]),
    "multiply_strided": lambda x, u: x.at[1:9:2, 3].multiply(2.0),
    "set_rows_window": lambda x, u: x.at[jnp.asarray([1, 40, 96]), 2:9].set(u[:3, :7]),
    "add_strided_window": lambda x, u: x.at[1:30:4, 5:8].add(u[:8, :3]),
    "set_out_of_range_dropped": lambda x, u: x.at[jnp.asarray([N + 3, 1])].set(u[:2]),
    "add_traced_slice_start": lambda x, u: jax.lax.dynamic_update_slice(
        x, u[:4], (jnp.sum(x[0, :1] * 0).astype(jnp.int32) + 80, 0)
    ),
}


@pytest.mark.parametrize("name", SCATTERS)
def test_scatters_values_grads_and_jvp(name, data, rng, small_budget):
    small_budget("8KB")  # their jitted gradients hold in-memory values beside the ops' blocks
    fn = SCATTERS[name]
    x_np, x = data
    u_np = rng.uniform(-1, 1, (len(ROWS), K)).astype(np.float32)
    u_np[:, 0] = rng.uniform(-1, 1, len(ROWS))
    u_np = np.concatenate([u_np, rng.uniform(-1, 1, (N - len(ROWS), K)).astype(np.float32)])
    u = jnp.asarray(u_np)
    expected = fn(jnp.asarray(x_np), u)
    for f in (fn, jax.jit(fn)):
        out = f(x, u)
        assert isinstance(out, jask.DiskArray)
        assert_same(out, expected)
    w = jnp.asarray(rng.uniform(-1, 1, expected.shape).astype(np.float32))

    def loss(x, u):
        return jnp.sum(jnp.sin(fn(x, u)) * w)

    want = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(x_np), u)
    for grad in (jax.grad(loss, argnums=(0, 1)), jax.jit(jax.grad(loss, argnums=(0, 1)))):
        gx, gu = grad(x, u)
        assert isinstance(gx, jask.DiskArray)
        assert_close(np.asarray(gx), want[0])
        assert_close(np.asarray(gu), want[1])
    t = rng.uniform(-1, 1, x_np.shape).astype(np.float32)
    _, t_want = jvp_reference(lambda x: fn(x, u), jnp.asarray(x_np), jnp.asarray(t))
    t_disk = jask.DiskArray.from_numpy(t)  # held until the (asynchronous) result is read
    _, t_out = jax.jvp(lambda x: fn(x, u), (x,), (t_disk,))
    assert_close(np.asarray(t_out), t_want)


def test_scatter_of_disk_updates(data, rng):
    x_np, x = data
    u_np = rng.uniform(-1, 1, (3, K)).astype(np.float32)
    u = jask.DiskArray.from_numpy(u_np)
    idx = jnp.asarray([5, 1, 5])
    for combine in ("set", "add"):

        def fn(x, u, combine=combine):
            return getattr(x.at[idx], combine)(u)

        expected = fn(jnp.asarray(x_np), jnp.asarray(u_np))
        assert_same(fn(x, u), expected)
        assert_same(jax.jit(fn)(x, u), expected)
    # repeated indices: XLA's scatter-mul in memory (Jask's streamed one needs unique indices)
    assert_same(x.at[idx].multiply(u), jnp.asarray(x_np).at[idx].multiply(u_np))
    out = x.at[jnp.asarray([5, 1, 7])].multiply(u, unique_indices=True)
    assert_same(out, jnp.asarray(x_np).at[jnp.asarray([5, 1, 7])].multiply(u_np))


_TENSOR = re.compile(r"tensor<((?:\d+x)*)(\w+)>")


def largest_tensor_bytes(mlir: str) -> int:
    """The largest tensor a lowered program holds (element types of up to 4 bytes)."""
    sizes = [
        math.prod(int(d) for d in m.group(1).split("x")[:-1]) * 4 for m in _TENSOR.finditer(mlir)
    ]
    assert len(sizes) == mlir.count("tensor<"), "every tensor type has static dims"
    return max(sizes)


def test_lowered_gradient_through_shape_primitives_stays_within_budget(small_budget):
    optax = pytest.importorskip("optax")
    budget = 4 << 20
    small_budget(budget)
    rows, width, classes = 1 << 16, 64, 16  # x: 16 MiB on disk
    x = jask.zeros((rows, width))
    w = jask.DiskArray.from_numpy(np.ones((width, classes), np.float32))
    labels = jnp.zeros(rows, jnp.int32)  # 256 KiB in memory

    def loss(x, w):
        logits = jnp.einsum("nd,dk->nk", x, w)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        padded = jax.lax.pad(x, 0.0, ((1, 1, 0), (0, 2, 1)))
        updated = x.at[jnp.asarray([3, 9])].set(1.0).at[10:20].add(2.0)
        return jnp.mean(ce) + jnp.sum(padded[::3]) + jnp.sum(jnp.flip(updated, 0) @ w)

    mlir = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w).as_text()
    assert "custom_call @jask_" in mlir
    assert largest_tensor_bytes(mlir) <= budget


VMAPPED = {
    "matmul": lambda r: r @ jnp.ones((3, 4)),
    "take_along_axis": lambda r: jnp.take_along_axis(r, jnp.zeros((5, 1), jnp.int32), -1),
    "pad": lambda r: jnp.pad(r, ((1, 0), (0, 2))),
    "dynamic_update_slice": lambda r: jax.lax.dynamic_update_slice(r, jnp.ones((2, 2)), (1, 1)),
    "at_set": lambda r: r.at[1].set(0.0),
    "flip": lambda r: jnp.flip(r, 0),
}


@pytest.mark.parametrize("name", VMAPPED)
def test_vmap_over_a_disk_array(name, rng):
    """jax.vmap applies JAX's batching rules, which bind the same primitives with a batch
    axis added to their params: the rules take them as they come."""
    x_np = rng.uniform(-1, 1, (7, 5, 3)).astype(np.float32)
    fn = jax.vmap(VMAPPED[name])
    assert_same(fn(jask.DiskArray.from_numpy(x_np)), fn(jnp.asarray(x_np)))


MORE_JNP = {
    "pad_reflect": lambda r: jnp.pad(r, ((2, 3), (1, 1)), mode="reflect"),
    "pad_edge": lambda r: jnp.pad(r, ((2, 3), (1, 1)), mode="edge"),
    "pad_wrap": lambda r: jnp.pad(r, ((2, 3), (1, 1)), mode="wrap"),
    "roll": lambda r: jnp.roll(r, 3, axis=0),
    "tile": lambda r: jnp.tile(r, (2, 3)),
    "repeat": lambda r: jnp.repeat(r, 2, axis=1),
    "triu": jnp.triu,
    "swapaxes": lambda r: jnp.swapaxes(r[None], 0, 2),
    "ravel_of_transpose": lambda r: r.T.ravel(),
    "kron": lambda r: jnp.kron(r[:3, :2], jnp.ones((2, 2))),
    "trace_einsum": lambda r: jnp.einsum("ii->", r[:7]),
    "matrix_power": lambda r: jnp.linalg.matrix_power(r[:7], 2),
    "set_one_element": lambda r: r.at[2, 3].set(1.0),
}


@pytest.mark.parametrize("name", MORE_JNP)
def test_jnp_functions_built_on_these_primitives(name, rng):
    x_np = rng.uniform(-1, 1, (13, 7)).astype(np.float32)
    fn = MORE_JNP[name]
    expected = fn(jnp.asarray(x_np))
    x = jask.DiskArray.from_numpy(x_np)
    for f in (fn, jax.jit(fn)):
        out = f(x)
        assert out.shape == expected.shape and out.dtype == expected.dtype
        assert_close(np.asarray(out), expected)
    want = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(fn(x)))))(jnp.asarray(x_np))
    assert_close(np.asarray(jax.grad(lambda x: jnp.sum(jnp.sin(fn(x))))(x)), want)


def test_several_index_arrays_index_as_jnp(data):
    values, x = data
    rows, cols = jnp.asarray([1, 2]), jnp.asarray([3, 4])
    np.testing.assert_array_equal(
        np.asarray(x[rows, cols]), np.asarray(jnp.asarray(values)[rows, cols])
    )
