"""Bad input gets a clear, standard exception naming what is wrong; data is never touched."""

import os

import jax
import ml_dtypes
import numpy as np
import pytest

import jask
from jask import _dtypes


@pytest.fixture
def x(rng):
    return jask.DiskArray.from_numpy(rng.uniform(size=(4, 6)).astype(np.float32))


def _raises_as_jnp(fn, disk_args, memory_args, match):
    """fn on DiskArrays raises what it raises on in-memory arrays (jnp's own errors), and the
    message matches `match` (the operands' shapes)."""
    with pytest.raises(Exception) as expected:
        fn(*memory_args)
    with pytest.raises(expected.type, match=match):
        fn(*disk_args)


def test_shape_mismatch_names_both_operands(x, rng):
    y_np = rng.uniform(size=(6, 4)).astype(np.float32)
    y = jask.DiskArray.from_numpy(y_np)
    x_np = np.asarray(x)
    for fn in (jask.add, jask.sub, jask.mul):
        _raises_as_jnp(fn, (x, y), (x_np, y_np), r"4, ?6.*6, ?4")
    _raises_as_jnp(jask.dot, (x, x), (x_np, x_np), r"\(6,\).*\(4,\)")


def test_mixed_dtypes_promote_as_jnp(x, rng):
    y_np = rng.uniform(size=(4, 6)).astype(np.float64)
    with jax.enable_x64(True):
        y = jask.DiskArray.from_numpy(y_np)
        out = jask.add(x, y)
        assert out.dtype == np.float64
        np.testing.assert_allclose(np.asarray(out), np.asarray(x).astype(np.float64) + y_np)
        assert jask.dot(x, y.T).dtype == np.float64


def test_errors_are_raised_at_trace_time_under_jit(x, rng):
    y = jask.DiskArray.from_numpy(rng.uniform(size=(3, 3)).astype(np.float32))
    with pytest.raises(TypeError, match=r"float32\[4,6\].*float32\[3,3\]"):
        jax.jit(jask.add)(x, y)


def test_unsupported_operands(x):
    x_np = np.asarray(x)
    _raises_as_jnp(jask.add, (x, "one"), (x_np, "one"), "one")
    _raises_as_jnp(
        jask.mul, (x, np.ones(5, np.float32)), (x_np, np.ones(5, np.float32)), r"4, ?6.*5"
    )
    # jask's namesakes of jnp functions take in-memory arrays as jnp does
    np.testing.assert_array_equal(np.asarray(jask.square(np.arange(3.0))), [0.0, 1.0, 4.0])


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.npy"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        jask.DiskArray.open(missing)
    with pytest.raises(FileNotFoundError, match=str(missing)):
        jask.DiskArray.open(missing, shape=(2,), dtype="float32")


def test_short_files_name_both_sizes(tmp_path):
    raw = tmp_path / "short.f32"
    raw.write_bytes(b"\0" * 40)
    with pytest.raises(ValueError, match=r"short\.f32.*48.*40"):
        jask.DiskArray.open(raw, shape=(3, 4), dtype="float32", offset=0)
    npy = tmp_path / "short.npy"
    np.save(npy, np.zeros((10, 10), np.float32))
    with open(npy, "r+b") as f:
        f.truncate(os.path.getsize(npy) - 8)
    with pytest.raises(ValueError, match=r"short\.npy.*400.*392"):
        jask.DiskArray.open(npy)


def test_pickles_are_never_loaded(tmp_path):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(TypeError, match=r"unsupported dtype '\|O'"):
        jask.DiskArray.open(path)
    structured = tmp_path / "structured.npy"
    np.save(structured, np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    with pytest.raises(TypeError, match="structured dtypes are not supported"):
        jask.DiskArray.open(structured)


def test_fortran_order_and_garbage_files_are_refused(tmp_path):
    fortran = tmp_path / "f.npy"
    np.save(fortran, np.asfortranarray(np.ones((3, 2), np.float32)))
    with pytest.raises(ValueError, match="Fortran"):
        jask.DiskArray.open(fortran)
    garbage = tmp_path / "g.npy"
    garbage.write_bytes(b"hello world, not an array")
    with pytest.raises(ValueError, match="not a .npy file"):
        jask.DiskArray.open(garbage)


def test_unsupported_dtypes_name_the_supported_ones(tmp_path):
    stored = ", ".join(_dtypes.SUPPORTED)
    with pytest.raises(TypeError, match=f"int4.*Jask stores {stored}$"):
        jask.DiskArray.from_numpy(np.ones(3, ml_dtypes.int4))
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"\0" * 16)
    with pytest.raises(TypeError, match=f"raw.bin.*'float4_e2m1fn'.*Jask stores {stored}$"):
        jask.DiskArray.open(raw, shape=(16,), dtype="float4_e2m1fn")
    # complex64 and uint8 are stored since issue 33.
    z = np.array([1 + 2j, -3j, 0.5], np.complex64)
    np.testing.assert_array_equal(np.asarray(jask.DiskArray.from_numpy(z)), z)
    u = jask.DiskArray.open(raw, shape=(16,), dtype="uint8")
    assert u.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(u), np.zeros(16, np.uint8))


def test_updating_a_read_only_array_leaves_the_file_untouched(tmp_path, rng):
    data = rng.uniform(size=(5, 5)).astype(np.float32)
    path = tmp_path / "params.npy"
    np.save(path, data)
    before = path.read_bytes()
    p = jask.DiskArray.open(path)
    with pytest.raises(PermissionError, match=r"params\.npy.*read-only"):
        p.update_(p * 2.0)
    assert path.read_bytes() == before
    writable = jask.DiskArray.open(path, mode="r+")
    writable.update_(writable * 2.0)
    np.testing.assert_array_equal(np.load(path), data * 2.0)


def test_update_with_another_shape_or_dtype(x, rng):
    with pytest.raises(ValueError, match=r"float32\[6,4\].*float32\[4,6\]"):
        x.update_(x.T)
    other = jask.DiskArray.from_numpy(rng.uniform(size=(4, 6)).astype(np.float16))
    with pytest.raises(ValueError, match=r"float16\[4,6\].*float32\[4,6\]"):
        x.update_(other)


def test_update_inside_jit_is_refused(x):
    with pytest.raises(TypeError, match="cannot run inside jax.jit"):
        jax.jit(lambda p: p.update_(p * 2.0))(x)


def test_budget_too_small_names_op_shapes_and_minimum(small_budget, rng):
    x = jask.DiskArray.from_numpy(rng.uniform(size=(300, 200)).astype(np.float32))
    small_budget(1024)
    with pytest.raises(
        ValueError,
        match=r"too small for add on add\(float32\[300,200\], "
        r"float32\[300,200\]\): it needs at least 1536 bytes",
    ):
        x + x
    with pytest.raises(Exception, match=r"too small for add.*1536 bytes"):
        jax.jit(jask.add)(x, x)
    small_budget(1536)
    np.testing.assert_array_equal(np.asarray(x + x), 2 * np.asarray(x))


def test_budget_values(small_budget):
    small_budget("64KB")
    assert jask.memory_budget() == 64 * 1024
    small_budget("1GB")
    assert jask.memory_budget() == 1 << 30
    small_budget(12345)
    assert jask.memory_budget() == 12345
    for bad in ("12 parsecs", "", -5):
        with pytest.raises(ValueError, match="memory budget must be"):
            jask.set_memory_budget(bad)
    for bad in (3.5, 1.5e6, None, True, b"64KB"):
        with pytest.raises(
            TypeError, match=f"memory budget must be .* of type {type(bad).__name__}"
        ):
            jask.set_memory_budget(bad)
    small_budget("8MB")
    assert jask.memory_budget() == 8 << 20  # binary units, as the docstring says
    with pytest.raises(ValueError, match="between 1024 bytes and"):
        jask.set_memory_budget(100)


def test_bad_open_arguments(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="mode"):
        jask.DiskArray.open(path, mode="w")
    with pytest.raises(ValueError, match="both shape= and dtype="):
        jask.DiskArray.open(path, shape=(3,))


def test_bad_transpose_axes(x):
    with pytest.raises(ValueError, match=r"not a permutation.*float32\[4,6\]"):
        jask.transpose(x, (0, 0))


def test_an_unsupported_primitive_names_user_code_in_a_folder_named_like_a_library(tmp_path):
    """User code is recognized by where the library packages are installed, not by folder names:
    a script in a folder named `jask` (as README's clone) or `jax` is still the user's."""
    import subprocess
    import sys

    for name in ("jask", "jax"):
        folder = tmp_path / name / "examples"
        folder.mkdir(parents=True)
        script = folder / "user_script.py"
        script.write_text(
            "import numpy as np, jax.numpy as jnp, jask\n"
            "def my_step(x):\n"
            "    return jnp.linalg.svd(x)\n"
            "jask.set_memory_budget('16KB')  # one 64x64 matrix: too large for XLA in memory\n"
            "try:\n"
            "    my_step(jask.DiskArray.from_numpy(np.ones((64, 64), np.float32)))\n"
            "except NotImplementedError as e:\n"
            "    print(e)\n"
        )
        out = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, cwd=folder, timeout=120
        )
        assert f"in my_step ({script}:3)" in out.stdout, (out.stdout, out.stderr[-2000:])
