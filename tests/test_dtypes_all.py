"""Every dtype Jask stores (the engine's table, src/engine/base/dtype.cpp): round trips through
from_numpy, .npy, raw files, npz, safetensors, Zarr and HDF5; the byte-moving ops; the
engine's elementwise programs and reductions on every integer width, the float8s and complex,
against jax.lax on jax.Arrays (values and dtypes); conversions between every pair as
jax.lax.convert_element_type (XLA's CPU backend) gives them."""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jask
from jask import _dtypes
from jask._jax.diskarray import DiskArray, DiskArrayTy
from jask._jax.op import _eager_call, _eager_value
from jask.ops._elementwise import encode, single_instruction

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT8 = tuple(n for n in _dtypes.SUPPORTED if n.startswith("float8"))
FLOATS = ("float16", "bfloat16", "float32", "float64", *FLOAT8)
COMPLEX = ("complex64", "complex128")
ALL = _dtypes.SUPPORTED


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def _dt(name) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name, name))


def _data(name, shape=(7, 5), seed=0) -> np.ndarray:
    """Values spanning the dtype: its extremes, zero and random ones."""
    dt = _dt(name)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
        v[:3] = [info.min, info.max, 0]
    elif dt.kind == "b":
        v = rng.random(n) < 0.5
    elif dt.kind == "c":
        v = (rng.standard_normal(n) * 100 + 1j * rng.standard_normal(n) * 100).astype(dt)
    else:
        v = (rng.standard_normal(n) * 8).astype(np.float32).astype(dt)
    return v.reshape(shape)


def _value(x):
    """A result's values: a DiskArray read into memory (a jax.Array as it is: the XLA route
    computes what the engine does not)."""
    return jask.materialize(x) if isinstance(x, DiskArray) else x


def _same(got, want):
    got, want = np.asarray(_value(got)), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.kind in "fcV" or want.dtype.name in FLOATS:
        np.testing.assert_array_equal(
            got.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
            want.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
        )
    else:
        np.testing.assert_array_equal(got, want)


def test_the_table_is_the_engines():
    table = jask._engine.dtypes()
    assert set(table) == set(ALL)
    for name, (code, itemsize, _) in table.items():
        assert _dtypes.dtype_code(_dt(name)) == code
        assert _dt(name).itemsize == itemsize
    for name in ("int4", "float4_e2m1fn", ">i4"):
        with pytest.raises(_dtypes.UnstorableDtypeError):
            _dtypes.storage_dtype(getattr(ml_dtypes, name, name))


@pytest.mark.parametrize("name", ALL)
def test_from_numpy_materialize_npy_and_raw_round_trip(name, tmp_path, x64):
    a = _data(name)
    d = jask.DiskArray.from_numpy(a)
    assert d.dtype == a.dtype
    _same(jask.materialize(d), a)
    p = tmp_path / "a.npy"
    d.save(p)
    _same(np.load(p), a)  # the descr of bfloat16 and the float8s is their name (ml_dtypes)
    _same(jask.materialize(jask.DiskArray.open(p)), a)
    raw = tmp_path / "a.bin"
    raw.write_bytes(b"xyz" + a.tobytes())
    _same(jask.materialize(jask.DiskArray.open(raw, shape=a.shape, dtype=a.dtype, offset=3)), a)
    # numpy's own .npy files of the dtypes numpy names ('<V1' and '<f1' name no float8)
    if name not in FLOAT8 and name != "bfloat16":
        np.save(tmp_path / "n.npy", a)
        _same(jask.materialize(jask.DiskArray.open(tmp_path / "n.npy")), a)
    # update_ in place, through the engine's byte moves
    w = jask.DiskArray.open(p, mode="r+")
    w.update_(jask.DiskArray.from_numpy(a[::-1].copy()))
    _same(np.load(p), a[::-1])


@pytest.mark.parametrize("name", ["int64", "uint64", "float64", "complex128"])
def test_64_bit_values_are_jax_canonical_without_x64(name, tmp_path):
    a = _data(name)
    want = jnp.asarray(a)  # int32, uint32, float32, complex64 while x64 is off
    assert want.dtype != a.dtype
    _same(jask.materialize(jask.DiskArray.from_numpy(a)), want)
    np.save(tmp_path / "a.npy", a)
    _same(jask.materialize(jask.DiskArray.open(tmp_path / "a.npy")), want)
    with pytest.raises(TypeError, match="x64"):
        jask.DiskArray.open(tmp_path / "a.npy", mode="r+")


def _moves(x, m):
    """The byte-moving ops, the same on a DiskArray (through jnp) and a jax.Array."""
    del m
    return {
        "slice": x[1:6:2, ::-2],
        "row": x[3],
        "reshape": x.reshape(5, 7),
        "transpose": x.T,
        "concatenate": jnp.concatenate([x, x[:2]], axis=0),
        "pad": x if x.dtype.kind == "c" else jnp.pad(x, ((1, 2), (0, 1))),
        "take": jnp.take(x, jnp.array([4, 0, 4, 6]), axis=0),
        "dynamic_slice": jax.lax.dynamic_slice(x, (2, 1), (3, 3)),
        "dynamic_update_slice": jax.lax.dynamic_update_slice(x, x[:2, :2], (4, 2)),
        "broadcast": jnp.broadcast_to(x[:1], (3, 7, 5)),
    }


# One dtype of each itemsize and kind: the moves copy bytes by itemsize.
MOVED = ("int8", "bool", "float8_e4m3fn", "uint16", "uint32", "int64", "complex64", "complex128")


@pytest.mark.parametrize("name", MOVED)
def test_byte_moves_match_jnp(name, x64):
    jask.set_memory_budget("16KB")
    a = _data(name, (7, 5), seed=1)
    d = jask.DiskArray.from_numpy(a)
    got = _moves(d, True)
    want = _moves(jnp.asarray(a), False)
    for key in want:
        if key == "pad" and name in COMPLEX:
            continue  # jask/_jax/op.py passes the padding value to the engine as a float
        g = got[key]
        g = jask.materialize(g) if isinstance(g, DiskArray) else g
        try:
            _same(g, want[key])
        except AssertionError as e:
            raise AssertionError(f"{key} of {name}: {e}") from None
    # under jit
    _same(jax.jit(lambda x: x[1:4].T)(d), jnp.asarray(a)[1:4].T)


# -- the engine's elementwise programs, called as the Python layer encodes them ---------------


def _map(instr, operands, out_dtype, reduction=None):
    """One instruction over DiskArray operands through the engine's map (or map_reduce)
    kernel."""
    avals = [x.aval for x in operands]
    shape = operands[0].shape
    params = encode(
        single_instruction(instr, len(operands)), avals, shape, out_dtype, reduction or "none"
    )
    params = {"label": instr, **{k: _eager_value(v) for k, v in params.items()}}
    handles = [x.handle for x in operands]
    if reduction:
        return _eager_call("scalar")("map_reduce", handles, [], [], params)
    h = _eager_call("array")("map", handles, [], [], params)
    return jask.materialize(DiskArray(DiskArrayTy(shape, np.dtype(out_dtype)), h))


_BINARY = {
    "add": jax.lax.add,
    "sub": jax.lax.sub,
    "mul": jax.lax.mul,
    "div": jax.lax.div,
    "rem": jax.lax.rem,
    "max": jax.lax.max,
    "min": jax.lax.min,
    "and": jax.lax.bitwise_and,
    "or": jax.lax.bitwise_or,
    "xor": jax.lax.bitwise_xor,
    "shift_left": jax.lax.shift_left,
    "shift_right_logical": jax.lax.shift_right_logical,
    "shift_right_arithmetic": jax.lax.shift_right_arithmetic,
}
_COMPARE = {"lt": jax.lax.lt, "ge": jax.lax.ge, "eq": jax.lax.eq, "ne": jax.lax.ne}
_UNARY = {"neg": jax.lax.neg, "not": jax.lax.bitwise_not, "abs": jax.lax.abs, "sign": jax.lax.sign}


@pytest.mark.parametrize("name", INTS)
def test_integer_instructions_as_jax_lax(name, x64):
    a, b = _data(name, (300,), 2), _data(name, (300,), 3)
    b[5:40] = np.arange(-2, 33).astype(b.dtype)  # zeros, -1 and shift amounts in range
    b[40:45] = [0, 1, 0, 2, 0]
    a[40:45] = np.iinfo(a.dtype).min
    da, db = jask.DiskArray.from_numpy(a), jask.DiskArray.from_numpy(b)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    for instr, f in _BINARY.items():
        _same(_map(instr, [da, db], a.dtype), f(ja, jb))
    for instr, f in _COMPARE.items():
        _same(_map(instr, [da, db], np.bool_), f(ja, jb))
    for instr, f in _UNARY.items():
        if instr == "abs" and a.dtype.kind == "u":
            continue  # jax.lax.abs takes signed integers only
        _same(_map(instr, [da], a.dtype), f(ja))
    # reductions fold in the dtype's width: jnp.sum(dtype=int8) wraps
    for reduction, f in (("sum", jnp.sum), ("max", jnp.max), ("min", jnp.min)):
        got = _map("copy", [da], a.dtype, reduction)
        want = f(ja, dtype=a.dtype) if reduction == "sum" else f(ja)
        assert np.asarray(want, np.float64) == np.float64(got) or a.dtype.itemsize == 8, (
            reduction,
            got,
            want,
        )


@pytest.mark.parametrize("name", FLOAT8 + ("float16", "bfloat16"))
def test_narrow_float_arithmetic_rounds_as_xla(name):
    a, b = _data(name, (200,), 4), _data(name, (200,), 5)
    da, db = jask.DiskArray.from_numpy(a), jask.DiskArray.from_numpy(b)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    for instr in ("add", "sub", "mul", "max"):
        _same(_map(instr, [da, db], a.dtype), _BINARY[instr](ja, jb))
    _same(_map("lt", [da, db], np.bool_), ja < jb)


@pytest.mark.parametrize("name", COMPLEX)
def test_complex_arithmetic(name, x64):
    a, b = _data(name, (100,), 6), _data(name, (100,), 7)
    da, db = jask.DiskArray.from_numpy(a), jask.DiskArray.from_numpy(b)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    rtol = 1e-6 if name == "complex64" else 1e-14
    for instr in ("add", "sub", "mul", "div"):
        got = _map(instr, [da, db], a.dtype)
        want = _BINARY[instr](ja, jb)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol)
    np.testing.assert_allclose(
        _map("exp", [jask.DiskArray.from_numpy(a / 50)], a.dtype), jnp.exp(ja / 50), rtol=rtol
    )
    _same(_map("neg", [da], a.dtype), -ja)
    _same(_map("eq", [da, da], np.bool_), ja == ja)


# -- conversions between every pair --------------------------------------------------------------


def _convert_data(name):
    dt = _dt(name)
    if dt.kind == "c":
        return _data(name, (60,), 8)
    if dt.kind in "iub":
        return _data(name, (60,), 8)
    # floats: specials, out-of-range values for every integer width, halves
    v = np.array(
        [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -1.5, 2.5, 127.9, -128.9, 255.5, 300.7,
         -300.7, 65535.9, 4e9, -4e9, 1e19, -1e19, 3e38, 448.0, 464.0, 465.0, 57344.0, 0.001]
    )  # fmt: skip
    with np.errstate(over="ignore", invalid="ignore"):
        return np.concatenate([v, _data("float32", (36,), 9).ravel()]).astype(dt)


@pytest.mark.parametrize("src", ALL)
def test_conversions_between_every_pair_as_xla(src, x64):
    a = _convert_data(src)
    d = jask.DiskArray.from_numpy(a)
    ja = jnp.asarray(a)
    for dst in ALL:
        with warnings.catch_warnings():  # complex to real: JAX's ComplexWarning
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            warnings.simplefilter("ignore", DeprecationWarning)  # "will soon raise"
            want = jax.lax.convert_element_type(ja, _dt(dst))
            got = jask.astype(d, dst)
        try:
            _same(got, want)
        except AssertionError as e:
            raise AssertionError(f"{src} -> {dst}: {e}") from None


# -- formats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_npz_safetensors_zarr(name, tmp_path, x64):
    a = _data(name, (9, 4), 10)
    np.savez(tmp_path / "a.npz", x=a)
    if name not in FLOAT8 and name != "bfloat16":  # np.load reads back what numpy names
        _same(jask.materialize(jask.open_npz(tmp_path / "a.npz")["x"]), a)
    d = jask.DiskArray.from_numpy(a)
    if name not in ("complex128", *FLOAT8[2:]) or name in ("float8_e4m3fnuz", "float8_e5m2fnuz"):
        jask.save_safetensors(tmp_path / "a.safetensors", {"x": d})
        _same(jask.materialize(jask.open_safetensors(tmp_path / "a.safetensors")["x"]), a)
        if a.dtype.kind in "biuf" and name not in FLOAT8 and name != "bfloat16":
            from safetensors.numpy import load_file

            _same(load_file(tmp_path / "a.safetensors")["x"], a)
    for fmt in (3, 2):
        if fmt == 2 and (name in FLOAT8 or name == "bfloat16"):
            continue
        path = tmp_path / f"z{fmt}"
        jask.to_zarr(d, path, chunks=(4, 3), zarr_format=fmt)
        _same(jask.materialize(jask.open_zarr(path)), a)


@pytest.mark.parametrize("name", [*INTS, "bool", "float16", "float32", "float64"])
def test_hdf5_datasets_of_every_width(name, tmp_path, x64):
    h5py = pytest.importorskip("h5py")
    a = _data(name, (11, 3), 11)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["x"] = a
        f.create_dataset("big", data=a.astype(a.dtype.newbyteorder(">")))
        f.create_dataset("chunked", data=a, chunks=(4, 3), compression="gzip")
    for key in ("x", "big", "chunked"):
        _same(jask.materialize(jask.open_hdf5(tmp_path / "a.h5", key)), a)


def test_pairs_of_dtypes_promote_as_jnp():
    """The dtype table against jnp.promote_types: every pair Jask stores that JAX promotes has
    a promoted dtype Jask stores too (so a binary op's result is storable)."""
    for x, y in itertools.product(ALL, repeat=2):
        with jax.enable_x64(True):
            try:
                promoted = jnp.promote_types(_dt(x), _dt(y))
            except jax.dtypes.TypePromotionError:  # float8s promote with nothing else
                assert {x, y} & set(FLOAT8), (x, y)
                continue
        assert promoted.name in ALL, (x, y, promoted)
