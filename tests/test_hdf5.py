"""jask.open_hdf5: contiguous datasets in place, chunked and filtered ones streamed, and the errors."""

import sys

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # float64 data keeps its dtype (conftest.x64)


def data(rng, shape, dtype):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def write(path, name, array, **kwargs):
    with h5py.File(path, "a") as f:
        f.create_dataset(name, data=array, **kwargs)


def assert_matches_h5py(path, name, x):
    with h5py.File(path, "r") as f:
        ref = f[name][()]
    assert isinstance(x, jask.DiskArray)
    out = np.asarray(x)
    assert out.dtype == ref.dtype.newbyteorder("="), (out.dtype, ref.dtype)
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)


CASES = [((37, 11), "f4"), ((53,), "f8"), ((5, 7, 9), "i4"), ((41,), "bool"), ((13, 6), "f2")]


@pytest.mark.parametrize("shape,dtype", CASES, ids=str)
def test_contiguous_datasets_are_opened_in_place(tmp_path, rng, shape, dtype):
    path = tmp_path / "c.h5"
    write(path, "g/x", data(rng, shape, dtype))
    x = jask.open_hdf5(path, "g/x")
    assert_matches_h5py(path, "g/x", x)
    with h5py.File(path, "r") as f:
        offset = f["g/x"].id.get_offset()
    with open(path, "r+b") as f:  # the file's bytes are the array's: patch one element
        f.seek(offset)
        f.write(np.zeros(1, dtype).tobytes())
    assert np.asarray(x).reshape(-1)[0] == 0


FILTERS = {
    "chunked": {},
    "gzip": {"compression": "gzip"},
    "gzip+shuffle": {"compression": "gzip", "shuffle": True},
    "fletcher32": {"fletcher32": True},
    "gzip+shuffle+fletcher32": {"compression": "gzip", "shuffle": True, "fletcher32": True},
}


@pytest.mark.parametrize("filters", list(FILTERS))
@pytest.mark.parametrize(
    "shape,dtype,chunks",
    [
        ((37, 11), "f4", (8, 5)),
        ((5, 7, 9), "i4", (2, 3, 4)),
        ((41,), "bool", (6,)),
        ((13, 6), "f2", (5, 4)),
        ((53,), "f8", (10,)),
    ],
    ids=str,
)
def test_chunked_and_filtered_datasets_are_streamed(tmp_path, rng, filters, shape, dtype, chunks):
    path = tmp_path / "k.h5"
    write(path, "x", data(rng, shape, dtype), chunks=chunks, **FILTERS[filters])
    assert_matches_h5py(path, "x", jask.open_hdf5(path, "x"))


def test_a_corrupt_chunk_is_a_value_error_naming_the_dataset(tmp_path, rng):
    path = tmp_path / "f.h5"
    write(path, "x", data(rng, (40,), "f4"), chunks=(10,), fletcher32=True)
    with h5py.File(path, "r") as f:
        at = f["x"].id.get_chunk_info(2).byte_offset
    with open(path, "r+b") as f:  # flip one byte of the third chunk
        f.seek(at + 5)
        byte = f.read(1)[0]
        f.seek(at + 5)
        f.write(bytes([byte ^ 0xFF]))
    x = jask.open_hdf5(path, "x")
    with pytest.raises(ValueError, match=r"f\.h5 \(x\)"):
        np.asarray(x)


@pytest.mark.parametrize("chunks", [None, (4, 3)], ids=["contiguous", "chunked"])
@pytest.mark.parametrize("dtype", [">f4", ">i4", ">f8"])
def test_big_endian_datasets_are_byte_swapped(tmp_path, rng, chunks, dtype):
    path = tmp_path / "be.h5"
    extra = {} if chunks is None else {"chunks": chunks, "compression": "gzip", "shuffle": True}
    write(path, "x", data(rng, (11, 7), dtype), **extra)
    x = jask.open_hdf5(path, "x")
    assert x.dtype == np.dtype(dtype).newbyteorder("<")
    assert_matches_h5py(path, "x", x)


def test_unallocated_chunks_read_as_the_fill_value(tmp_path, rng):
    path = tmp_path / "fill.h5"
    part = rng.standard_normal((6, 4)).astype(np.float32)
    with h5py.File(path, "w") as f:
        ds = f.create_dataset(
            "x", shape=(17, 10), dtype="f4", chunks=(6, 4), fillvalue=-3.5, compression="gzip"
        )
        ds[6:12, 4:8] = part  # one chunk of the 3 x 3 grid
        f.create_dataset(
            "empty", shape=(9, 5), dtype="i4", fillvalue=7
        )  # contiguous, never written
        compact = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        compact.set_layout(h5py.h5d.COMPACT)
        f.create_dataset("small", data=np.arange(6, dtype=np.float32), dcpl=compact)
    x = jask.open_hdf5(path, "x")
    assert_matches_h5py(path, "x", x)
    assert np.asarray(x)[0, 0] == np.float32(-3.5)
    assert_matches_h5py(path, "empty", jask.open_hdf5(path, "empty"))
    assert_matches_h5py(path, "small", jask.open_hdf5(path, "small"))
    for name in ("x", "empty", "small"):
        with pytest.raises(
            ValueError, match=rf"fill\.h5: dataset '{name}' cannot be opened with mode='r\+'"
        ):
            jask.open_hdf5(path, name, mode="r+")


@pytest.mark.parametrize("chunks", [None, (29, 5)], ids=["contiguous", "gzip"])
def test_ops_at_a_budget_forcing_many_blocks(tmp_path, rng, small_budget, chunks):
    path = tmp_path / "ops.h5"
    ref = rng.standard_normal((1201, 37)).astype(np.float32)
    write(path, "w", ref, **({} if chunks is None else {"chunks": chunks, "compression": "gzip"}))
    small_budget("4KB" if chunks is None else "32KB")  # the chunk cache needs 8 KB of it
    x = jask.open_hdf5(path, "w")
    assert_close(jnp.sum(x, axis=0), ref.sum(axis=0))
    out = np.asarray(jnp.tanh(x * 0.5 + 1.0) - jnp.exp(-jnp.abs(x)))
    assert out.dtype == np.float32
    assert_close(out, np.tanh(ref * 0.5 + 1.0) - np.exp(-np.abs(ref)))
    grad = jax.jit(jax.grad(lambda a: jnp.sum(jnp.square(a))))(x)
    assert np.asarray(grad).dtype == np.float32
    assert_close(grad, 2 * ref)


def test_update_in_place_of_a_contiguous_dataset_is_read_by_h5py(tmp_path, rng):
    path = tmp_path / "u.h5"
    a, b = data(rng, (23, 9), "f4"), data(rng, (50,), "f8")
    write(path, "a", a)
    write(path, "b", b, chunks=(7,), compression="gzip")
    x = jask.open_hdf5(path, "a", mode="r+")
    x.update_(jnp.square(x) + 1.0)
    # HDF5 locks the file it opens: while the writable array lives, h5py reads it without locking.
    with h5py.File(path, "r", locking=False) as f:
        np.testing.assert_array_equal(f["a"][()], np.square(a) + 1.0)
        np.testing.assert_array_equal(f["b"][()], b)  # the other dataset's bytes kept
    del x
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["a"][()], np.square(a) + 1.0)


def test_r_plus_while_h5py_holds_the_file_is_a_blocking_io_error(tmp_path, rng):
    path = tmp_path / "l.h5"
    write(path, "a", data(rng, (4,), "f4"))
    with h5py.File(path, "r"):  # HDF5 flock()s the files it opens (unless told not to)
        with pytest.raises(BlockingIOError, match=r"l\.h5.*close every h5py.File"):
            jask.open_hdf5(path, "a", mode="r+")
        jask.open_hdf5(path, "a")  # a reader takes no lock


def test_filters_and_dtypes_jask_does_not_decode_are_refused(tmp_path, rng):
    path = tmp_path / "e.h5"
    write(path, "lzf", data(rng, (20,), "f4"), chunks=(5,), compression="lzf")
    write(path, "so", data(rng, (20,), "i4"), chunks=(5,), scaleoffset=0)
    write(path, "c", np.array([1 + 2j, -3j], np.complex64))
    extremes = np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max])
    write(path, "i64", extremes)
    write(path, "s", np.array([b"ab", b"cd"]))
    with h5py.File(path, "a") as f:
        ds = f.create_dataset("skipped", shape=(8,), dtype="f4", chunks=(4,), compression="gzip")
        ds.id.write_direct_chunk((0,), np.ones(4, np.float32).tobytes(), filter_mask=1)
    with pytest.raises(
        NotImplementedError, match=r"e\.h5: dataset 'lzf' uses the HDF5 filter 'lzf'"
    ):
        jask.open_hdf5(path, "lzf")
    with pytest.raises(
        NotImplementedError, match=r"dataset 'so' uses the HDF5 filter 'scaleoffset'"
    ):
        jask.open_hdf5(path, "so")
    with pytest.raises(
        NotImplementedError, match=r"dataset 'skipped': the chunk at \(0,\).*filter"
    ):
        jask.open_hdf5(path, "skipped")
    # h5py's complex is an HDF5 compound of two floats: Jask does not decode it.
    with pytest.raises(
        TypeError, match=r"e\.h5: dataset 'c' has dtype complex64 \(an HDF5 compound datatype\)"
    ):
        jask.open_hdf5(path, "c")
    assert_matches_h5py(path, "i64", jask.open_hdf5(path, "i64"))  # stored since issue 33
    with pytest.raises(TypeError, match=r"dataset 's' has dtype \|S2"):
        jask.open_hdf5(path, "s")
    with pytest.raises(KeyError, match=r"no dataset named 'nope'"):
        jask.open_hdf5(path, "nope")
    with h5py.File(path, "a") as f:
        f.create_group("grp")
    with pytest.raises(TypeError, match=r"'grp' is a Group, not a dataset"):
        jask.open_hdf5(path, "grp")
    with pytest.raises(ValueError, match="mode must be"):
        jask.open_hdf5(path, "lzf", mode="w")


def test_truncated_and_foreign_files_are_value_errors(tmp_path, rng):
    path = tmp_path / "t.h5"
    write(path, "x", data(rng, (1000,), "f4"))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 1000])
    with pytest.raises(ValueError, match=r"t\.h5: not a readable HDF5 file.*truncated"):
        jask.open_hdf5(path, "x")
    path.write_bytes(b"no HDF5 here")
    with pytest.raises(ValueError, match=r"t\.h5: not a readable HDF5 file"):
        jask.open_hdf5(path, "x")
    with pytest.raises(FileNotFoundError):
        jask.open_hdf5(tmp_path / "missing.h5", "x")


def test_without_h5py_the_import_error_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match="pip install h5py"):
        jask.open_hdf5(tmp_path / "x.h5", "x")
