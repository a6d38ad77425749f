"""Zarr v2 and v3 arrays written by zarr-python, opened by jask.open_zarr; jask.to_zarr read back.

Every reading case compares values AND dtypes with zarr-python's reading of the same array, on
shapes that are not multiples of the chunk shape; the ops run at a budget forcing many blocks.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

import jask
from jask.formats.zarr import read_spec

from conftest import assert_close

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),  # zarr-python's v2/numcodecs notes
    pytest.mark.usefixtures("x64"),  # float64 data keeps its dtype (conftest.x64)
]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def _write(path, data, *, written=None, **options):
    """A zarr-python array at `path` holding `data` (only `written`'s part, if given)."""
    array = zarr.create_array(store=str(path), shape=data.shape, dtype=data.dtype, **options)
    where = written if written is not None else ...
    array[where] = data[where]
    return path


def _zarr_values(path):
    return np.asarray(zarr.open_array(str(path))[...])


def _assert_same(x, path):
    want = _zarr_values(path)
    native = want.dtype.newbyteorder("=")  # Jask stores big-endian data little-endian
    got = np.asarray(x)
    assert x.dtype == native and got.dtype == native, (x.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


NAN_ROWS = (slice(0, 5),)  # the rest of the array is never written: missing chunks read NaN

# id → (data, zarr.create_array options, the part written)
CASES = {
    "v2-none": ((10, 7), "float32", dict(chunks=(4, 3), compressors=None), None),
    "v2-zstd-nested": (
        (11,),
        "float64",
        dict(
            chunks=(4,),
            compressors=numcodecs.Zstd(level=1),
            chunk_key_encoding={"name": "v2", "separator": "/"},
        ),
        None,
    ),
    "v2-blosc": (
        (9, 5, 3),
        "int32",
        dict(chunks=(4, 2, 2), compressors=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)),
        None,
    ),
    "v2-gzip": ((13, 6), "float16", dict(chunks=(5, 4), compressors=numcodecs.GZip(5)), None),
    "v2-zlib": ((10, 7), "bool", dict(chunks=(3, 3), compressors=numcodecs.Zlib(1)), None),
    "v2-order-f-big-endian": (
        (10, 7),
        ">f8",
        dict(chunks=(4, 3), compressors=None, order="F"),
        None,
    ),
    "v2-missing-nan": (
        (10, 7),
        "float32",
        dict(chunks=(3, 3), fill_value=float("nan")),
        NAN_ROWS,
    ),
    "v3-bytes-dot-separator": (
        (10, 7),
        "float32",
        dict(
            chunks=(4, 3),
            compressors=None,
            chunk_key_encoding={"name": "default", "separator": "."},
        ),
        None,
    ),
    "v3-zstd": ((7, 5, 4), "float64", dict(chunks=(3, 2, 4), compressors=ZstdCodec()), None),
    "v3-gzip": ((13,), "int32", dict(chunks=(5,), compressors=GzipCodec()), None),
    "v3-blosc": (
        (9, 6),
        "float16",
        dict(chunks=(4, 4), compressors=BloscCodec(cname="lz4", shuffle="shuffle")),
        None,
    ),
    "v3-crc32c": (
        (10, 7),
        "bool",
        dict(chunks=(4, 3), compressors=[ZstdCodec(), Crc32cCodec()]),
        None,
    ),
    "v3-big-endian-transpose": (
        (10, 7),
        "float32",
        dict(
            chunks=(4, 3),
            filters=[TransposeCodec(order=(1, 0))],
            serializer=BytesCodec(endian="big"),
            compressors=None,
        ),
        None,
    ),
    "v3-v2-keys-dot-separator": (
        (10, 7),
        "int32",
        dict(chunks=(4, 3), chunk_key_encoding={"name": "v2", "separator": "."}),
        None,
    ),
    "v3-sharded-end": ((19, 7), "float32", dict(chunks=(2, 3), shards=(8, 6)), None),
    "v3-sharded-start": (
        (11, 7),
        "float64",
        dict(
            chunks=(8, 6),
            serializer=ShardingCodec(
                chunk_shape=(2, 3), codecs=[BytesCodec(), ZstdCodec()], index_location="start"
            ),
            compressors=None,
        ),
        None,
    ),
    "v3-sharded-missing-nan": (
        (19, 7),
        "float32",
        dict(chunks=(2, 3), shards=(8, 6), fill_value=float("nan")),
        NAN_ROWS,  # shard row 0 partly written (empty inner chunks), rows 1-2 missing shards
    ),
    "v3-missing-nan": (
        (10, 7),
        "float32",
        dict(chunks=(3, 3), fill_value=float("nan")),
        NAN_ROWS,
    ),
}


def _case(tmp_path, case):
    shape, dtype, options, written = CASES[case]
    fmt = 2 if case.startswith("v2") else 3
    return _write(
        tmp_path / f"{case}.zarr", _data(shape, dtype), written=written, zarr_format=fmt, **options
    )


@pytest.mark.parametrize("case", list(CASES))
def test_open_zarr_reads_what_zarr_python_reads(tmp_path, case):
    path = _case(tmp_path, case)
    _assert_same(jask.open_zarr(path), path)


@pytest.mark.parametrize("case", ["v2-order-f-big-endian", "v3-sharded-end", "v3-missing-nan"])
def test_spec_matches_zarr_python_metadata(tmp_path, case):
    path = _case(tmp_path, case)
    spec, z = read_spec(path), zarr.open_array(str(path))
    assert spec.shape == z.shape and spec.chunk_shape == z.chunks
    assert spec.dtype == z.dtype.newbyteorder("=")
    # A row per stored chunk, ids ascending within the grid.
    ids = spec.chunks[:, 0]
    assert (np.diff(ids) > 0).all() and 0 <= ids.min()
    assert ids.max() < math.prod(math.ceil(n / c) for n, c in zip(z.shape, z.chunks))
    fill = np.asarray(z.fill_value, spec.dtype)
    np.testing.assert_array_equal(np.asarray(spec.fill_value, spec.dtype), fill)


def test_sharded_spec_has_a_row_per_stored_inner_chunk(tmp_path):
    path = _case(tmp_path, "v3-sharded-missing-nan")
    spec = read_spec(path)
    grid = (10, 3)  # ceil((19, 7) / (2, 3))
    # Rows 0-4 were written: inner chunk rows 0-2 are stored, in the shards of row 0 only.
    assert spec.chunks[:, 0].tolist() == list(range(3 * grid[1]))
    assert len(spec.files) == 2  # shards (0, 0) and (0, 1); (1, *) and (2, *) are not stored
    # Each stored row is one zstd frame of a whole (2, 3) inner chunk.
    shard = Path(spec.files[spec.chunks[0, 1]]).read_bytes()
    offset, nbytes = spec.chunks[0, 2:]
    chunk = np.frombuffer(numcodecs.Zstd().decode(shard[offset : offset + nbytes]), np.float32)
    np.testing.assert_array_equal(chunk.reshape(2, 3), _zarr_values(path)[:2, :3])


@pytest.mark.parametrize(
    "value, dtype, want",
    [
        ("NaN", np.float32, np.nan),
        ("-Infinity", np.float64, -np.inf),
        ("0x3f800000", np.float32, 1.0),
        ("0x7fc00000", np.float32, np.nan),
        ("0x3c00", np.float16, 1.0),
        ("0xbff0000000000000", np.float64, -1.0),
        (True, np.bool_, True),
        (-7, np.int32, -7),
    ],
)
def test_fill_values(tmp_path, value, dtype, want):
    name = {np.float32: "float32", np.float64: "float64", np.float16: "float16"}.get(dtype)
    path = _write(tmp_path / "a.zarr", np.zeros(5, dtype), written=(slice(0, 0),), chunks=(2,))
    _edit_json(path / "zarr.json", fill_value=value, **({"data_type": name} if name else {}))
    got = np.asarray(jask.open_zarr(path / "zarr.json"))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.full(5, want, dtype))


def test_v3_fill_value_null_is_refused_as_zarr_python_refuses_it(tmp_path):
    path = _write(tmp_path / "a.zarr", np.zeros(5, np.float32), written=(slice(0, 0),), chunks=(2,))
    _edit_json(path / "zarr.json", fill_value=None)
    with pytest.raises((TypeError, ValueError)):
        zarr.open_array(str(path), mode="r")
    with pytest.raises(ValueError, match=r"zarr\.json: invalid fill_value None for dtype float32"):
        jask.open_zarr(path)


# -- ops on an opened zarr at a budget forcing many blocks ----------------------------------------


# Float32 arrays of 1200 x 70 (336 KB, seven times the budget below) in chunks of 2 KB.
OPS_CASES = {
    "v2-blosc": dict(zarr_format=2, chunks=(16, 32), compressors=numcodecs.Blosc("lz4", 5, 1)),
    "v3-big-endian-transpose": dict(
        chunks=(16, 32),
        filters=[TransposeCodec(order=(1, 0))],
        serializer=BytesCodec(endian="big"),
        compressors=ZstdCodec(),
    ),
    "v3-sharded": dict(chunks=(16, 32), shards=(64, 64)),
}
OPS_BUDGET = "48KB"  # the chunked reader reserves 8 KB per chunk, up to half the budget


@pytest.mark.parametrize("case", list(OPS_CASES))
def test_ops_on_an_opened_zarr(tmp_path, small_budget, case):
    path = _write(tmp_path / "x.zarr", _data((1200, 70), np.float32), **OPS_CASES[case])
    want = _zarr_values(path)
    x = jask.open_zarr(path)
    assert x.dtype == np.float32
    small_budget(OPS_BUDGET)
    assert_close(jnp.sum(x, axis=0), want.sum(axis=0))
    chain = jax.jit(lambda v: jnp.tanh(v * 0.5 + 1.0) - v)(x)
    assert chain.dtype == np.float32
    assert_close(chain, np.tanh(want * 0.5 + 1.0) - want)
    grad = jax.jit(jax.grad(lambda v: jnp.sum(jnp.square(v - 1.0))))(x)
    assert grad.dtype == np.float32
    assert_close(grad, 2 * (want - 1.0))


# -- writing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("codec", [None, "zstd", "gzip", "blosc"])
def test_to_zarr_is_read_back_by_zarr_python(tmp_path, small_budget, zarr_format, codec):
    data = _data((301, 40), np.float32)
    x = jask.DiskArray.from_numpy(data)
    small_budget("16KB")  # a third of the array
    path = tmp_path / "out.zarr"
    x.to_zarr(path, chunks=(40, 16), zarr_format=zarr_format, codec=codec)
    z = zarr.open_array(str(path))
    assert z.dtype == np.float32 and z.chunks == (40, 16)
    np.testing.assert_array_equal(np.asarray(z[...]), data)
    _assert_same(jask.open_zarr(path), path)


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "float64"])
def test_to_zarr_dtypes_and_default_chunks(tmp_path, dtype):
    data = _data((1000, 3, 2), dtype)
    path = tmp_path / "out.zarr"
    jask.to_zarr(data, path)  # a NumPy array goes through a scratch DiskArray
    z = zarr.open_array(str(path))
    assert z.chunks[1:] == (3, 2)  # whole along every axis but the first
    stored = jax.dtypes.canonicalize_dtype(data.dtype)  # float64 is float32 while x64 is off
    assert z.dtype == stored
    np.testing.assert_array_equal(np.asarray(z[...]), data.astype(stored))


def test_to_zarr_of_bfloat16_and_0d(tmp_path):
    # bfloat16: zarr v3's "bfloat16" data type (zarr-extensions; zarr-python 3.1 cannot read it).
    data = _data((9, 4), np.float32).astype(jnp.bfloat16)
    jask.to_zarr(data, tmp_path / "bf.zarr", chunks=(4, 4))
    back = jask.open_zarr(tmp_path / "bf.zarr")
    assert back.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(back), data)
    with pytest.raises(TypeError, match="zarr v2 has no bfloat16"):
        jask.to_zarr(data, tmp_path / "bf2.zarr", zarr_format=2)
    for zarr_format in (2, 3):
        path = tmp_path / f"scalar{zarr_format}.zarr"
        jask.to_zarr(np.float32(2.5), path, zarr_format=zarr_format)
        assert _zarr_values(path).shape == () and float(_zarr_values(path)) == 2.5
        _assert_same(jask.open_zarr(path), path)


def test_to_zarr_refuses_to_replace_what_is_not_a_zarr_array(tmp_path):
    x = jask.DiskArray.from_numpy(np.arange(6, dtype=np.float32))
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        x.to_zarr(other)
    with pytest.raises(FileExistsError, match="not a zarr array"):
        x.to_zarr(other, overwrite=True)
    assert (other / "keep.txt").read_text() == "mine"
    array = tmp_path / "a.zarr"
    x.to_zarr(array, chunks=(4,))
    (array / "c" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="keep.txt"):
        x.to_zarr(array, overwrite=True)
    assert (array / "c" / "keep.txt").exists()
    assert sorted(os.listdir(tmp_path)) == ["a.zarr", "notes"]  # no temp folder left


def test_to_zarr_overwrite_replaces_a_zarr_array(tmp_path):
    path = tmp_path / "a.zarr"
    _write(path, _data((10,), np.float32), chunks=(3,), zarr_format=2)
    new = _data((4, 4), np.float32, seed=1)
    jask.DiskArray.from_numpy(new).to_zarr(path, overwrite=True, codec="gzip")
    assert not (path / ".zarray").exists()
    np.testing.assert_array_equal(_zarr_values(path), new)
    assert sorted(os.listdir(tmp_path)) == ["a.zarr"]
    with pytest.raises(ValueError, match="is read from the zarr array"):
        jask.open_zarr(path).to_zarr(path, overwrite=True)
    np.testing.assert_array_equal(_zarr_values(path), new)


def test_a_failed_to_zarr_leaves_the_old_array(tmp_path, monkeypatch):
    path = tmp_path / "a.zarr"
    old = _data((10,), np.float32)
    _write(path, old, chunks=(3,))
    x = jask.DiskArray.from_numpy(_data((10,), np.float32, seed=1))

    def write_half_then_fail(x, *, chunk_shape, codecs, paths):
        Path(paths[0]).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("jask.formats.zarr.write_chunked", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        x.to_zarr(path, chunks=(4,), overwrite=True)
    with pytest.raises(OSError, match="disk full"):
        x.to_zarr(tmp_path / "new.zarr")
    np.testing.assert_array_equal(_zarr_values(path), old)
    assert sorted(os.listdir(tmp_path)) == ["a.zarr"]  # the temporary folders are gone


# -- groups ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_zarr_of_a_group(tmp_path, zarr_format):
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=zarr_format)
    a, b = _data((5, 3), np.float32), _data((7,), np.int32)
    root.create_array("a", shape=a.shape, dtype=a.dtype, chunks=(2, 2))[...] = a
    root.create_group("sub").create_array("b", shape=b.shape, dtype=b.dtype, chunks=(3,))[...] = b
    arrays = jask.open_zarr(tmp_path / "g.zarr")
    assert sorted(arrays) == ["a", "sub/b"]
    np.testing.assert_array_equal(np.asarray(arrays["a"]), a)
    assert arrays["sub/b"].dtype == np.int32
    np.testing.assert_array_equal(np.asarray(arrays["sub/b"]), b)
    np.testing.assert_array_equal(np.asarray(jask.open_zarr(tmp_path / "g.zarr", name="sub/b")), b)
    with pytest.raises(KeyError, match="g.zarr: the zarr group has no array 'c'") as e:
        jask.open_zarr(tmp_path / "g.zarr", name="c")
    assert isinstance(e.value, ValueError)  # a refusal of the store, as every other


# -- errors ----------------------------------------------------------------------------------------


def _edit_json(path: Path, **changes):
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))


def test_missing_and_invalid_metadata(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.zarr"):
        jask.open_zarr(tmp_path / "nothing.zarr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: not a zarr array"):
        jask.open_zarr(tmp_path / "empty")
    path = _write(tmp_path / "a.zarr", _data((10,), np.float32), chunks=(3,), zarr_format=2)
    (path / ".zarray").write_text("{not json")
    with pytest.raises(ValueError, match=r"a.zarr/.zarray: invalid zarr metadata"):
        jask.open_zarr(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_shape_chunk_mismatch(tmp_path, zarr_format):
    path = _write(
        tmp_path / "a.zarr", _data((10, 4), np.float32), chunks=(3, 4), zarr_format=zarr_format
    )
    if zarr_format == 2:
        _edit_json(path / ".zarray", chunks=[3])
        meta = ".zarray"
    else:
        _edit_json(
            path / "zarr.json",
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": [3]}},
        )
        meta = "zarr.json"
    with pytest.raises(
        ValueError, match=rf"{meta}.*\[3\] do not match the array's shape \[10, 4\]"
    ):
        jask.open_zarr(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_dtype_jask_does_not_store(tmp_path, zarr_format):
    """v2: big-endian complex as zarr-python writes it (a byte swap of a whole item would swap
    the real and imaginary parts). v3: int4 and float8_e8m0fnu, the ml_dtypes names the
    zarr-extensions data types use (zarr-python writes neither: the metadata is edited). The
    uint8 array beside them opens with zarr-python's values (stored since issue 33)."""
    path = tmp_path / "g.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    counts = np.array([0, 1, 127, 128, 255], np.uint8)
    root.create_array("counts", shape=counts.shape, dtype="uint8", chunks=(2,))[...] = counts
    if zarr_format == 2:
        refused = {"waves": ">c8"}
        root.create_array("waves", shape=(4,), dtype=">c8", chunks=(2,))
    else:
        refused = {"nibbles": "int4", "scales": "float8_e8m0fnu"}
        for name, dtype in refused.items():
            root.create_array(name, shape=(4,), dtype="uint8", chunks=(2,))
            _edit_json(path / name / "zarr.json", data_type=dtype)
    for name, dtype in refused.items():
        with pytest.raises(
            TypeError,
            match=rf"array '{name}'\): zarr dtype '{dtype}'.* is not supported; Jask stores float32",
        ):
            jask.open_zarr(path, name=name)
    with pytest.raises(TypeError, match="open the group's other arrays with name="):
        jask.open_zarr(path)
    got = np.asarray(jask.open_zarr(path, name="counts"))
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, _zarr_values(path / "counts"))


def test_filters_and_unknown_codecs_are_refused(tmp_path):
    path = _write(
        tmp_path / "f.zarr",
        _data((10,), np.int32),
        chunks=(3,),
        zarr_format=2,
        filters=[numcodecs.Delta(dtype="<i4")],
    )
    with pytest.raises(NotImplementedError, match="filters.*delta"):
        jask.open_zarr(path)
    path = _write(tmp_path / "c.zarr", _data((10,), np.float32), chunks=(3,))
    meta = json.loads((path / "zarr.json").read_text())
    _edit_json(path / "zarr.json", codecs=meta["codecs"] + [{"name": "lzma"}])
    with pytest.raises(NotImplementedError, match="codec 'lzma'"):
        jask.open_zarr(path)


def _a_shard(path: Path) -> Path:
    return path / "c" / "0" / "0"


def test_truncated_shard_index(tmp_path):
    path = _case(tmp_path, "v3-sharded-end")
    shard = _a_shard(path)
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(ValueError, match=rf"shard {shard} is truncated: 100 bytes"):
        jask.open_zarr(path)


def test_shard_index_crc_mismatch(tmp_path):
    path = _case(tmp_path, "v3-sharded-end")
    shard = _a_shard(path)
    raw = bytearray(shard.read_bytes())
    raw[-10] ^= 1  # inside the index, at the end of the shard
    shard.write_bytes(raw)
    with pytest.raises(ValueError, match="crc32c"):
        jask.open_zarr(path)


def test_shard_index_past_the_end(tmp_path):
    path = _write(
        tmp_path / "s.zarr",
        _data((8, 6), np.float32),
        chunks=(2, 3),
        shards=(8, 6),
        compressors=None,
        serializer="auto",
    )
    meta = json.loads((path / "zarr.json").read_text())
    meta["codecs"][0]["configuration"]["index_codecs"] = [
        {"name": "bytes", "configuration": {"endian": "little"}}
    ]
    (path / "zarr.json").write_text(json.dumps(meta))
    shard = _a_shard(path)
    raw = bytearray(shard.read_bytes()[:-4])  # the index, now without its checksum
    raw[-16:-8] = (len(raw) * 2).to_bytes(8, "little")  # the last inner chunk's offset
    shard.write_bytes(raw)
    with pytest.raises(ValueError, match="inner chunk 7 at offset .* past the end"):
        jask.open_zarr(path)


def test_chunk_crc_mismatch(tmp_path):
    path = _case(tmp_path, "v3-crc32c")
    chunk = path / "c" / "1" / "1"
    raw = bytearray(chunk.read_bytes())
    raw[0] ^= 0xFF
    chunk.write_bytes(raw)
    with pytest.raises(ValueError, match="zarr.json"):
        np.asarray(jask.open_zarr(path))  # checked when the chunk is read


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "int16", "float32"])
def test_big_endian_v3_arrays_read_as_zarr_python_reads_them(tmp_path, x64, dtype):
    """A big-endian bytes codec swaps each item; a complex item is two floats swapped in place
    (swapping the pair as one item exchanged the real and imaginary parts)."""
    path = str(tmp_path / "big.zarr")
    values = (np.arange(5) * (1 - 2j) + 0.5j).astype(dtype) if "complex" in dtype else None
    values = values if values is not None else (np.arange(5) * 3 - 7).astype(dtype)
    array = zarr.create_array(
        store=path,
        shape=(5,),
        dtype=dtype,
        chunks=(2,),
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    array[...] = values
    out = np.asarray(jask.open_zarr(path))
    expected = zarr.open_array(path)[...]
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)
