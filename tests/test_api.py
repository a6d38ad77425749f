"""Constructors, attributes, operators, bridges, storage format and update_."""

import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jask
from jask import _engine

from conftest import assert_close


def test_from_numpy_round_trips_every_storage_dtype(rng):
    for dtype in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32):
        data = (rng.uniform(-100, 100, (37, 23))).astype(dtype)
        with jax.enable_x64(dtype == np.float64):  # JAX holds float64 only with x64
            x = jask.DiskArray.from_numpy(data)
        assert x.dtype == np.dtype(dtype) and x.shape == (37, 23)
        np.testing.assert_array_equal(np.asarray(x), data)


def test_attributes_and_repr(rng):
    x = jask.DiskArray.from_numpy(rng.uniform(size=(5, 7)).astype(np.float32))
    assert (x.shape, x.dtype, x.ndim, x.size, x.nbytes) == ((5, 7), np.float32, 2, 35, 140)
    assert len(x) == 5
    text = repr(x)
    assert "(5, 7)" in text and "float32" in text and x.path in text


def test_attributes_on_tracers(rng):
    x = jask.DiskArray.from_numpy(rng.uniform(size=(5, 7)).astype(np.float32))
    seen = {}

    def f(x):
        seen.update(
            shape=x.shape,
            dtype=x.dtype,
            ndim=x.ndim,
            size=x.size,
            nbytes=x.nbytes,
            T=x.T.shape,
            is_disk=isinstance(x, jask.DiskArray),
        )
        return jask.sum(x)

    jax.jit(f)(x)
    assert seen == dict(
        shape=(5, 7), dtype=np.float32, ndim=2, size=35, nbytes=140, T=(7, 5), is_disk=True
    )


def test_scratch_files_are_npy_with_aligned_data(rng):
    data = rng.uniform(size=(33, 9)).astype(np.float32)
    x = jask.DiskArray.from_numpy(data) * 2.0
    on_disk = np.load(x.path, mmap_mode="r")
    np.testing.assert_array_equal(on_disk, data * 2.0)
    assert on_disk.offset % 4096 == 0
    assert os.stat(x.path).st_mode & 0o777 == 0o600


def test_open_npy_in_place_is_not_copied(tmp_path, rng):
    data = rng.uniform(size=(40, 3)).astype(np.float32)
    path = tmp_path / "features.npy"
    np.save(path, data)
    x = jask.DiskArray.open(path)
    assert x.path == str(path) and not x.writable
    np.testing.assert_array_equal(np.asarray(x), data)
    assert_close(jask.sum(x), data.sum())


def test_open_raw_file_like_memmap(tmp_path, rng):
    data = rng.uniform(size=(11, 6)).astype(np.float32)
    path = tmp_path / "raw.f32"
    path.write_bytes(b"\0" * 100 + data.tobytes())
    x = jask.DiskArray.open(path, shape=(11, 6), dtype="float32", offset=100)
    np.testing.assert_array_equal(np.asarray(x), np.memmap(path, np.float32, "r", 100, (11, 6)))


def test_zeros_and_full():
    z = jask.zeros((13, 5), "float32")
    np.testing.assert_array_equal(np.asarray(z), np.zeros((13, 5), np.float32))
    with jax.enable_x64(True):
        f = jask.full((4,), 2.5, "float64")
    assert f.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(f), np.full(4, 2.5))


def test_materialize_and_asarray_agree(rng):
    data = rng.uniform(size=(17, 4)).astype(np.float32)
    x = jask.DiskArray.from_numpy(data)
    dense = jask.materialize(x)
    assert isinstance(dense, jax.Array)
    np.testing.assert_array_equal(np.asarray(dense), data)
    np.testing.assert_array_equal(np.asarray(jax.jit(jask.materialize)(x)), data)


def test_save_writes_a_loadable_copy(tmp_path, rng):
    data = rng.uniform(size=(8, 8)).astype(np.float32)
    x = jask.DiskArray.from_numpy(data)
    x.save(tmp_path / "copy.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "copy.npy"), data)


def test_operators_on_values(rng):
    a_np, b_np = (rng.uniform(-1, 1, (6, 6)).astype(np.float32) for _ in range(2))
    a, b = jask.DiskArray.from_numpy(a_np), jask.DiskArray.from_numpy(b_np)
    assert_close(np.asarray(a + b), a_np + b_np)
    assert_close(np.asarray(a - b), a_np - b_np)
    assert_close(np.asarray(a * b), a_np * b_np)
    assert_close(np.asarray(a @ b), a_np @ b_np)
    assert_close(np.asarray(-a), -a_np)
    assert_close(np.asarray(a.T), a_np.T)
    assert_close(np.asarray(2 * a), 2 * a_np)
    assert_close(np.asarray(a * np.float32(3)), 3 * a_np)
    assert_close(np.asarray(jnp.array(0.1) * a), 0.1 * a_np)
    assert_close(np.asarray(np.float32(0.5) * a), 0.5 * a_np)


def test_scalar_times_diskarray_inside_jit_like_optax(rng):
    g_np = rng.uniform(-1, 1, (9, 4)).astype(np.float32)
    g = jask.DiskArray.from_numpy(g_np)
    out = jax.jit(lambda g, lr: jnp.asarray(lr) * g)(g, 0.1)
    assert_close(np.asarray(out), 0.1 * g_np)
    out = jax.jit(lambda g: jnp.array(-0.5) * g)(g)
    assert_close(np.asarray(out), -0.5 * g_np)


def test_dtypes_other_than_float32(rng):
    for dtype, rtol in ((np.float16, 2e-3), (ml_dtypes.bfloat16, 1e-2)):
        _check_dtype(rng, dtype, rtol)
    with jax.enable_x64(True):  # float64 computation is JAX's only with x64 (jnp semantics)
        _check_dtype(rng, np.float64, 1e-12)
    i = jask.DiskArray.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4))
    np.testing.assert_array_equal(np.asarray(i * 3 + i), np.arange(12).reshape(3, 4) * 4)
    assert int(jask.sum(i)) == 66


def _check_dtype(rng, dtype, rtol):
    """dot, +, and a sum on DiskArrays of `dtype` against float64 NumPy."""
    a_np = rng.uniform(-1, 1, (19, 13)).astype(dtype)
    b_np = rng.uniform(-1, 1, (13, 7)).astype(dtype)
    a, b = jask.DiskArray.from_numpy(a_np), jask.DiskArray.from_numpy(b_np)
    ref = a_np.astype(np.float64)
    assert a.dtype == np.dtype(dtype)
    assert_close(np.asarray(jask.dot(a, b)).astype(np.float64), ref @ b_np.astype(np.float64), rtol)
    assert_close(np.asarray(a + a).astype(np.float64), 2 * ref, rtol)
    # the sum comes back as a JAX scalar: float32 unless jax_enable_x64
    assert_close(float(jask.sum(jask.square(a))), float(np.sum(ref * ref)), max(rtol, 1e-6))


def test_update_overwrites_in_place_and_keeps_identity(rng):
    p_np = rng.uniform(size=(21, 5)).astype(np.float32)
    p = jask.DiskArray.from_numpy(p_np)
    path, handle = p.path, p.handle
    q = p.update_(p * 2.0)
    assert q is p and p.path == path and p.handle == handle
    np.testing.assert_array_equal(np.asarray(p), p_np * 2.0)
    np.testing.assert_array_equal(np.load(path), p_np * 2.0)


def test_jitted_step_with_update_compiles_once(rng):
    p = jask.DiskArray.from_numpy(rng.uniform(size=(30, 4)).astype(np.float32))
    x = jask.DiskArray.from_numpy(rng.uniform(size=(30, 4)).astype(np.float32))
    traces = []

    @jax.jit
    def grad_step(p, x):
        traces.append(1)
        return jax.grad(lambda p: jask.sum(jask.square(p - x)))(p)

    expected = np.asarray(p).copy()
    for _ in range(5):
        g = grad_step(p, x)
        expected = expected - 0.1 * 2 * (expected - np.asarray(x))
        p = p.update_(p - 0.1 * g)
    assert len(traces) == 1
    assert_close(np.asarray(p), expected)


def test_fresh_arrays_of_same_type_do_not_retrace(rng):
    traces = []

    @jax.jit
    def f(x):
        traces.append(1)
        return jask.sum(x)

    for _ in range(3):
        f(jask.DiskArray.from_numpy(rng.uniform(size=(10, 3)).astype(np.float32)))
    assert len(traces) == 1


def test_read_and_write_paths_agree_with_and_without_direct_io(rng, small_budget):
    small_budget("64KB")
    data = rng.uniform(-1, 1, (1001, 257)).astype(np.float32)
    results = []
    for direct in (True, False):
        _engine.set_direct_io(direct)
        try:
            before = _engine.io_counters()[0]
            x = jask.DiskArray.from_numpy(data)
            y = x * 3.0 + x
            results.append((np.asarray(y), float(jask.sum(y)), _engine.io_counters()[0] - before))
        finally:
            _engine.set_direct_io(True)
    (y_direct, s_direct, direct_bytes), (y_buffered, s_buffered, buffered_direct_bytes) = results
    np.testing.assert_array_equal(y_direct, y_buffered)
    assert s_direct == s_buffered
    assert direct_bytes > data.nbytes  # aligned blocks bypassed the page cache
    assert buffered_direct_bytes == 0


def test_io_modes_give_the_same_values(rng):
    x_np = rng.uniform(-1, 1, (1 << 16, 65)).astype(
        np.float32
    )  # 16 MiB: reads split into parallel parts
    x = jask.DiskArray.from_numpy(x_np)
    try:
        for mode in ("buffered", "direct", "auto"):
            jask.set_io_mode(mode)
            assert jask.io_mode() == mode
            assert_close(np.asarray(jask.square(x))[::997], (x_np**2)[::997])
            assert_close(jask.sum(x), np.sum(x_np.astype(np.float64)))
    finally:
        jask.set_io_mode("auto")
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        jask.set_io_mode("fast")


def test_jitted_jnp_functions_of_diskarrays_trace_lower_and_compile(rng):
    """jax.jit(jnp.sum) called on a DiskArray runs op by op; its `.trace`, `.lower`,
    `.eval_shape` and `.lower().compile()` give the program JAX would (jnp's functions are
    themselves jitted, and Jask inlines them when they are called)."""
    x_np = rng.uniform(-1, 1, (37, 29)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    for fn, ref in ((jnp.sum, jnp.sum(x_np)), (jax.grad(jnp.sum), np.ones_like(x_np))):
        jitted = jax.jit(fn)
        shape = jitted.eval_shape(x)
        assert (shape.shape, shape.dtype) == (ref.shape, ref.dtype)
        assert "jask" in str(jitted.trace(x).jaxpr)
        assert "jask_program" in jitted.lower(x).as_text()
        for out in (jitted.lower(x).compile()(x), jitted(x)):
            assert out.dtype == ref.dtype
            assert_close(np.asarray(out), ref)
