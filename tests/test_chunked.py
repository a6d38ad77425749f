"""Chunked arrays (jask.formats._chunked): encoded chunks read in place and written.

Chunk files are built here with numcodecs and zlib, for shapes that are not multiples of the chunk
shape; arrays are read and computed on at budgets that force many blocks, against NumPy / jnp.
"""

import io
import math
import pickle
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numcodecs
import numpy as np
import pytest

import jask
from jask.formats._chunked import crc32c, open_chunked, write_chunked

pytestmark = pytest.mark.usefixtures("x64")  # float64 data keeps its dtype (conftest.x64)


KiB = 1 << 10


def _chunk_grid(shape, chunk_shape):
    return tuple(-(-s // c) for s, c in zip(shape, chunk_shape))


def _chunks_of(arr, chunk_shape):
    """Each chunk of `arr` in C order of the grid, full size (edges padded with junk)."""
    grid = _chunk_grid(arr.shape, chunk_shape)
    for idx in np.ndindex(*grid):
        full = np.full(chunk_shape, -7, arr.dtype)
        sl = tuple(
            slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunk_shape, arr.shape)
        )
        full[tuple(slice(0, s.stop - s.start) for s in sl)] = arr[sl]
        yield full


def _store(tmp_path, arr, chunk_shape, encode, *, missing=(), order="C", one_file=True):
    """Writes arr's chunks encoded by `encode(bytes) -> bytes`; returns (files, chunks table)."""
    rows, files, blob = [], [], bytearray()
    for i, chunk in enumerate(_chunks_of(arr, chunk_shape)):
        if i in missing:
            rows.append((-1, 0, 0))
            continue
        data = encode(chunk.tobytes(order=order))
        if one_file:
            rows.append((0, len(blob), len(data)))
            blob += data
        else:  # a file per chunk, "the rest of the file" (zarr v2)
            path = tmp_path / f"c{i}"
            path.write_bytes(data)
            files.append(str(path))
            rows.append((len(files) - 1, 0, -1))
    if one_file:
        (tmp_path / "chunks.bin").write_bytes(bytes(blob))
        files = [str(tmp_path / "chunks.bin")]
    (tmp_path / "meta").write_text("{}")
    return files, np.array(rows, dtype=np.int64).reshape(-1, 3)


def _raw_deflate(level=6):
    def encode(data):
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()

    return encode


def _with_crc(encode):
    return lambda data: (lambda b: b + crc32c(b).to_bytes(4, "little"))(encode(data))


def _hdf5_shuffle(itemsize):
    def encode(data):
        a = np.frombuffer(data, np.uint8).reshape(-1, itemsize)
        return zlib.compress(a.T.tobytes())

    return encode


CODECS = {
    "none": ([], lambda b: b),
    "zstd": ([("zstd", 0)], numcodecs.Zstd(level=3).encode),
    "zlib": ([("zlib", 0)], numcodecs.Zlib(level=5).encode),
    "gzip": ([("gzip", 0)], numcodecs.GZip(level=5).encode),
    "deflate": ([("deflate", 0)], _raw_deflate()),
    "blosc": ([("blosc", 0)], numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE).encode),
    "shuffle_zlib": ([("zlib", 0), ("shuffle", 4)], _hdf5_shuffle(4)),
    "zstd_crc32c": ([("crc32c", 0), ("zstd", 0)], _with_crc(numcodecs.Zstd(level=1).encode)),
}
SHAPES = {"1d": ((1000,), (64,)), "2d": ((37, 53), (8, 16)), "3d": ((5, 7, 9), (2, 3, 4))}


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize("codec", list(CODECS))
def test_codecs_read_back_with_missing_chunks_as_fill(tmp_path, small_budget, codec, shape_id):
    shape, chunk_shape = SHAPES[shape_id]
    arr = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    decode, encode = CODECS[codec]
    missing = {1, 4}
    files, chunks = _store(
        tmp_path, arr, chunk_shape, encode, missing=missing, one_file=codec != "zstd"
    )
    want = arr.copy()
    for i, idx in enumerate(np.ndindex(*_chunk_grid(shape, chunk_shape))):
        if i in missing:
            want[tuple(slice(j * c, (j + 1) * c) for j, c in zip(idx, chunk_shape))] = np.nan
    small_budget(16 * KiB)
    x = open_chunked(
        tmp_path / "meta",
        dtype="float32",
        shape=shape,
        chunk_shape=chunk_shape,
        codecs=decode,
        files=files,
        chunks=chunks,
        fill_value=float("nan"),
    )
    got = np.asarray(x)
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_array_equal(got, want)


def test_fortran_order_and_big_endian_chunks(tmp_path, small_budget):
    arr = np.arange(23 * 19, dtype=np.float64).reshape(23, 19) / 7
    big = arr.astype(">f8")
    files, chunks = _store(tmp_path, big, (5, 4), numcodecs.Zstd().encode, order="F")
    small_budget(8 * KiB)
    x = open_chunked(
        tmp_path / "meta",
        dtype="float64",
        shape=arr.shape,
        chunk_shape=(5, 4),
        codecs=[("zstd", 0), ("order_f", 0), ("byteswap", 8)],
        files=files,
        chunks=chunks,
    )
    got = np.asarray(x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, arr)


@pytest.fixture
def chunked_2d(tmp_path, small_budget):
    arr = np.random.default_rng(2).standard_normal((61, 45)).astype(np.float32)
    files, chunks = _store(tmp_path, arr, (8, 10), numcodecs.Zstd().encode, missing={3})
    arr[0:8, 30:40] = 0.0
    small_budget(16 * KiB)
    x = open_chunked(
        tmp_path / "meta",
        dtype=np.float32,
        shape=arr.shape,
        chunk_shape=(8, 10),
        codecs=[("zstd", 0)],
        files=files,
        chunks=chunks,
        name="w",
    )
    return x, arr


def test_ops_on_a_chunked_array(chunked_2d):
    x, arr = chunked_2d
    for axis in (None, 0, 1):
        got = np.asarray(jnp.sum(x, axis=axis))
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, arr.sum(axis=axis), rtol=1e-4, atol=1e-4)
    y = np.asarray(x * 2 + 1)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, arr * 2 + 1, rtol=1e-6)
    g = np.asarray(jax.jit(jax.grad(lambda a: jnp.sum(a * a)))(x))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * arr, rtol=1e-6)
    s = np.asarray(x[3:17])
    assert s.dtype == np.float32
    np.testing.assert_array_equal(s, arr[3:17])


def test_a_chunked_array_is_read_only(chunked_2d):
    x, _ = chunked_2d
    with pytest.raises(PermissionError, match="meta"):
        x.update_(x + 1)
    with pytest.raises(pickle.PicklingError, match="chunked"):
        pickle.dumps(x)


def test_budget_bounds_the_cache_and_each_chunk_is_decoded_once(tmp_path, small_budget):
    arr = np.random.default_rng(3).standard_normal((300, 257)).astype(np.float32)
    files, chunks = _store(tmp_path, arr, (16, 64), numcodecs.Zstd().encode)
    budget = 256 * KiB  # the array is 301 KiB: many blocks
    small_budget(budget)
    x = open_chunked(
        tmp_path / "meta",
        dtype="float32",
        shape=arr.shape,
        chunk_shape=(16, 64),
        codecs=[("zstd", 0)],
        files=files,
        chunks=chunks,
    )
    jask.reset_memory_peak()
    got = np.asarray(x)
    assert jask._engine.chunks_decoded(x.handle) == len(chunks)  # each chunk once
    total = float(jnp.sum(x * x))
    after_reads = jask._engine.chunks_decoded(x.handle)
    assert float(jnp.sum(x)) == pytest.approx(float(arr.sum(dtype=np.float64)), rel=1e-4, abs=1e-2)
    peak = jask.memory_stats()["blocks_peak"]
    np.testing.assert_array_equal(got, arr)
    np.testing.assert_allclose(total, float((arr.astype(np.float64) ** 2).sum()), rtol=1e-4)
    assert 0 < peak <= budget, peak
    # Two bands of chunks fit the cache: a one-operand call decodes each chunk once.
    assert jask._engine.chunks_decoded(x.handle) - after_reads == len(chunks)


@pytest.mark.parametrize(
    "shape, chunk_shape, budget",
    [((64, 64), (64, 64), 16 * KiB), ((37, 29), (2, 3), 4 * KiB)],  # big chunks; tiny ones
    ids=["large-chunks", "tiny-chunks"],
)
def test_too_small_a_budget_names_the_array_and_a_budget_that_works(
    tmp_path, small_budget, shape, chunk_shape, budget
):
    arr = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    files, chunks = _store(tmp_path, arr, chunk_shape, numcodecs.Zstd().encode)
    x = open_chunked(
        tmp_path / "meta",
        dtype="float32",
        shape=arr.shape,
        chunk_shape=chunk_shape,
        codecs=[("zstd", 0)],
        files=files,
        chunks=chunks,
        name="big",
    )
    small_budget(budget)
    with pytest.raises(MemoryError, match=r"meta \(big\).*set_memory_budget\((\d+)\)") as e:
        np.asarray(x)
    works = int(str(e.value).rsplit("set_memory_budget(", 1)[1].split(")")[0])
    small_budget(works)
    np.testing.assert_array_equal(np.asarray(x), arr)


def test_deflated_npz_member_streams_within_the_budget(tmp_path, small_budget):
    arr = np.random.default_rng(4).integers(-1000, 1000, (1024, 512)).astype(np.int32)  # 2 MiB
    buf = io.BytesIO()
    np.save(buf, arr)
    npy = buf.getvalue()
    header = len(npy) - arr.nbytes
    (tmp_path / "member").write_bytes(_raw_deflate(1)(npy))
    budget = 64 * KiB
    small_budget(budget)
    x = open_chunked(
        tmp_path / "member",
        dtype="int32",
        shape=arr.shape,
        chunk_shape=arr.shape,
        codecs=[("deflate", 0), ("skip", header)],
        files=[str(tmp_path / "member")],
        chunks=np.array([[0, 0, -1]], np.int64),
        name="a.npy",
    )
    jask.reset_memory_peak()
    got = np.asarray(x)
    rows = np.asarray(x[700:705])  # a read behind the stream starts it over
    assert 0 < jask.memory_stats()["blocks_peak"] <= budget
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, arr)
    np.testing.assert_array_equal(rows, arr[700:705])


def test_corrupt_chunk_names_path_name_and_chunk(tmp_path):
    arr = np.arange(100, dtype=np.float32).reshape(10, 10)
    files, chunks = _store(tmp_path, arr, (4, 4), numcodecs.Zstd().encode)
    raw = bytearray((tmp_path / "chunks.bin").read_bytes())
    f, off, n = chunks[4]  # grid index (1, 1)
    raw[off + 4 : off + n] = bytes(b ^ 0x5A for b in raw[off + 4 : off + n])
    (tmp_path / "chunks.bin").write_bytes(bytes(raw))
    x = open_chunked(
        tmp_path / "meta",
        dtype="float32",
        shape=arr.shape,
        chunk_shape=(4, 4),
        codecs=[("zstd", 0)],
        files=files,
        chunks=chunks,
        name="d",
    )
    with pytest.raises(ValueError, match=r"meta \(d\), chunk \(1, 1\)"):
        np.asarray(x)


def test_bad_arguments_are_named(tmp_path):
    (tmp_path / "meta").write_text("{}")
    args = dict(dtype="float32", shape=(10, 10), chunk_shape=(4, 4), files=[], fill_value=0)
    rows = np.zeros((9, 3), np.int64)
    rows[:, 0] = -1
    with pytest.raises(ValueError, match=r"int64 array of shape \(9, 3\)"):
        open_chunked(tmp_path / "meta", codecs=[], chunks=rows[:8], **args)
    with pytest.raises(NotImplementedError, match="lzma"):
        open_chunked(tmp_path / "meta", codecs=[("lzma", 0)], chunks=rows, **args)
    with pytest.raises(TypeError, match="int4"):
        open_chunked(tmp_path / "meta", codecs=[], chunks=rows, **{**args, "dtype": "int4"})
    with pytest.raises(ValueError, match="as many axes"):
        open_chunked(tmp_path / "meta", codecs=[], chunks=rows, **{**args, "chunk_shape": (4,)})
    x = open_chunked(tmp_path / "meta", codecs=[], chunks=rows, **{**args, "fill_value": 2.5})
    np.testing.assert_array_equal(np.asarray(x), np.full((10, 10), 2.5, np.float32))


def test_write_chunked_round_trip(tmp_path, small_budget):
    arr = np.random.default_rng(5).standard_normal((37, 53)).astype(np.float32)
    x = jask.DiskArray.from_numpy(arr)
    grid = _chunk_grid(arr.shape, (8, 16))
    paths = [str(tmp_path / f"{i}.{j}") for i, j in np.ndindex(*grid)]
    paths[2] = None
    small_budget(32 * KiB)  # a band (8 x 53 float32) fits; two workers cut and encode it
    blosc = 5 | 1 << 8 | 4 << 16  # zstd inside blosc, byte shuffle
    sizes = write_chunked(
        x, chunk_shape=(8, 16), codecs=[("blosc", blosc), ("crc32c", 0)], paths=paths
    )
    want = list(_chunks_of(arr, (8, 16)))
    for i, p in enumerate(paths):
        if p is None:
            assert sizes[i] == 0
            continue
        data = Path(p).read_bytes()
        assert len(data) == sizes[i]
        assert int.from_bytes(data[-4:], "little") == crc32c(data[:-4])
        chunk = np.frombuffer(numcodecs.Blosc().decode(data[:-4]), np.float32).reshape(8, 16)
        edge = tuple(
            slice(0, min(c, s - k * c))
            for k, c, s in zip(np.unravel_index(i, grid), (8, 16), arr.shape)
        )
        np.testing.assert_array_equal(chunk[edge], want[i][edge])
        assert not chunk[tuple(slice(e.stop, None) for e in edge)].any()  # padded with zeros
    # Per-chunk reads when a band does not fit, from a chunked source; zstd read back.
    files = [p or paths[0] for p in paths]
    src = open_chunked(
        tmp_path / "0.0",
        dtype="float32",
        shape=arr.shape,
        chunk_shape=(8, 16),
        codecs=[("crc32c", 0), ("blosc", 0)],
        files=files,
        chunks=np.array([[i, 0, -1] if p else [-1, 0, 0] for i, p in enumerate(paths)], np.int64),
    )
    expect = arr.copy()
    expect[0:8, 32:48] = 0
    # Of 20 KiB, the source's cache takes 8 and a band of 30 rows (6 KiB) with the encoding
    # workspace (8 KiB) does not fit the rest: each chunk is read as a hyperslab.
    small_budget(20 * KiB)
    (tmp_path / "out").mkdir()
    grid2 = _chunk_grid(arr.shape, (30, 7))
    paths2 = [str(tmp_path / "out" / f"{i}") for i in range(math.prod(grid2))]
    write_chunked(src, chunk_shape=(30, 7), codecs=[("zstd", 3)], paths=paths2)
    for i, full in enumerate(_chunks_of(expect, (30, 7))):
        chunk = np.frombuffer(numcodecs.Zstd().decode(Path(paths2[i]).read_bytes()), np.float32)
        g = np.unravel_index(i, grid2)
        edge = tuple(slice(0, min(c, s - k * c)) for k, c, s in zip(g, (30, 7), arr.shape))
        np.testing.assert_array_equal(chunk.reshape(30, 7)[edge], full[edge])


def test_crc32c_known_value():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_hdf5_chunks_with_shuffle_deflate_and_fletcher32(tmp_path, small_budget):
    h5py = pytest.importorskip("h5py")
    arr = np.random.default_rng(6).standard_normal((29, 23)).astype(np.float32)
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "d", data=arr, chunks=(8, 10), shuffle=True, compression="gzip", fletcher32=True
        )
    with h5py.File(path, "r") as f:
        ds = f["d"]
        infos = [ds.id.get_chunk_info(i) for i in range(ds.id.get_num_chunks())]
        by_corner = {tuple(i.chunk_offset): i for i in infos}
    grid = _chunk_grid(arr.shape, (8, 10))
    rows = []
    for idx in np.ndindex(*grid):
        info = by_corner[tuple(int(k) * c for k, c in zip(idx, (8, 10)))]
        rows.append((0, info.byte_offset, info.size))
    chunks = np.array(rows, np.int64)
    codecs = [("fletcher32", 0), ("zlib", 0), ("shuffle", 4)]
    small_budget(16 * KiB)
    x = open_chunked(
        path,
        dtype="float32",
        shape=arr.shape,
        chunk_shape=(8, 10),
        codecs=codecs,
        files=[str(path)],
        chunks=chunks,
        name="d",
    )
    np.testing.assert_array_equal(np.asarray(x), arr)
    raw = bytearray(path.read_bytes())
    raw[chunks[2, 1] + chunks[2, 2] - 5] ^= 0xFF  # the compressed bytes' last, before the sum
    (tmp_path / "bad.h5").write_bytes(bytes(raw))
    bad = open_chunked(
        tmp_path / "bad.h5",
        dtype="float32",
        shape=arr.shape,
        chunk_shape=(8, 10),
        codecs=codecs,
        files=[str(tmp_path / "bad.h5")],
        chunks=chunks,
        name="d",
    )
    with pytest.raises(ValueError, match=r"bad.h5 \(d\), chunk \(0, 2\).*Fletcher-32"):
        np.asarray(bad)
