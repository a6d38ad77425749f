"""jask.open_npz: stored members in place, deflated members streamed, and the archives refused."""

import io
import zipfile

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jask

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # float64 data keeps its dtype (conftest.x64)


def arrays(rng):
    """Members of every dtype Jask stores that numpy saves, 0-D to 3-D, odd shapes."""
    return {
        "f32": rng.standard_normal((37, 11)).astype(np.float32),
        "f64": rng.standard_normal(53),
        "i32": rng.integers(-1000, 1000, size=(5, 7, 9), dtype=np.int32),
        "b": rng.random(41) > 0.5,
        "f16": rng.standard_normal((13, 6)).astype(np.float16),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), np.float32),
    }


@pytest.fixture(params=["savez", "savez_compressed"])
def archive(request, tmp_path, rng):
    path = tmp_path / "a.npz"
    getattr(np, request.param)(path, **arrays(rng))
    return path


def assert_same(x, ref):
    assert isinstance(x, jask.DiskArray)
    out = np.asarray(x)
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out.dtype, ref.dtype, out.shape)
    np.testing.assert_array_equal(out, ref)


def test_every_member_matches_numpy_load(archive):
    opened = jask.open_npz(archive)
    with np.load(archive) as ref:
        assert list(opened) == list(ref.keys())
        for name, x in opened.items():
            assert_same(x, ref[name])


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_big_endian_members_are_byte_swapped(tmp_path, rng, save):
    path = tmp_path / "be.npz"
    ref = {"f": rng.standard_normal((19, 5)).astype(">f4"), "i": np.arange(-7, 30, dtype=">i4")}
    ref["d"] = rng.standard_normal(11).astype(">f8")
    save(path, **ref)
    for name, x in jask.open_npz(path).items():
        assert_same(x, ref[name].astype(ref[name].dtype.newbyteorder("<")))


def test_stored_members_are_read_in_place(tmp_path, rng):
    path = tmp_path / "a.npz"
    a = rng.standard_normal((9, 4)).astype(np.float32)
    np.savez(path, a=a, b=a + 1)
    x = jask.open_npz(path)["b"]
    # Patch the member's first element in the archive: the open array sees the file's bytes.
    data = path.read_bytes()
    at = data.index((a + 1).tobytes())
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(np.float32(-7.0).tobytes())
    assert np.asarray(x)[0, 0] == np.float32(-7.0)
    np.testing.assert_array_equal(np.asarray(x).reshape(-1)[1:], (a + 1).reshape(-1)[1:])


def test_members_opens_only_the_named_ones(tmp_path, rng):
    path = tmp_path / "a.npz"
    labels = np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max])
    np.savez(path, labels=labels, waves=np.ones(2, ">c8"), x=np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"a\.npz: member 'waves\.npy' has dtype >c8.*members="):
        jask.open_npz(path)
    opened = jask.open_npz(path, members=["labels", "x"])
    assert list(opened) == ["labels", "x"]
    assert_same(opened["labels"], labels)  # int64: stored since issue 33
    assert_same(opened["x"], np.ones(3, np.float32))
    with pytest.raises(
        ValueError, match=r"no member named 'y'; the archive holds 'labels', 'waves', 'x'"
    ):
        jask.open_npz(path, members=["y"])


@pytest.mark.parametrize("compressed", [False, True])
def test_ops_on_members_at_a_budget_forcing_many_blocks(tmp_path, rng, small_budget, compressed):
    path = tmp_path / "a.npz"
    ref = rng.standard_normal((1201, 37)).astype(np.float32)
    (np.savez_compressed if compressed else np.savez)(path, w=ref)
    small_budget("32KB" if compressed else "4KB")  # the chunk cache needs 8 KB of it
    x = jask.open_npz(path)["w"]
    assert_close(jnp.sum(x, axis=0), ref.sum(axis=0))
    chain = jnp.tanh(x * 0.5 + 1.0) - jnp.exp(-jnp.abs(x))
    out = np.asarray(chain)
    assert out.dtype == np.float32
    assert_close(out, np.tanh(ref * 0.5 + 1.0) - np.exp(-np.abs(ref)))
    grad = jax.jit(jax.grad(lambda a: jnp.sum(jnp.square(a))))(x)
    assert np.asarray(grad).dtype == np.float32
    assert_close(grad, 2 * ref)


def test_r_plus_is_refused_naming_the_crc(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, a=np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"a\.npz.*mode='r\+'.*CRC-32"):
        jask.open_npz(path, mode="r+")
    with pytest.raises(ValueError, match="mode must be 'r' or 'r\\+'"):
        jask.open_npz(path, mode="w")


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_dtypes_and_layouts_jask_does_not_store_are_refused(tmp_path, save):
    path = tmp_path / "a.npz"
    save(path, o=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(TypeError, match=r"member 'o\.npy' holds Python objects"):
        jask.open_npz(path)
    # Big-endian complex: a byte swap of a whole item would swap the real and imaginary parts.
    save(path, z=np.array([1 + 2j, -3j], ">c16"))
    with pytest.raises(
        TypeError, match=r"member 'z\.npy' has dtype >c16 \(shape \(2,\)\); Jask stores float32"
    ):
        jask.open_npz(path)
    # ml_dtypes' int4, which np.save writes as one-byte voids.
    save(path, n=np.arange(4).astype(ml_dtypes.int4))
    with pytest.raises(TypeError, match=r"member 'n\.npy' has dtype \|V1 \(shape \(4,\)\)"):
        jask.open_npz(path)
    counts = np.array([0, 1, 128, 255], np.uint8)  # uint8: stored since issue 33
    save(path, u=counts)
    with np.load(path) as ref:
        assert_same(jask.open_npz(path)["u"], ref["u"])
    save(path, f=np.asfortranarray(np.ones((3, 4), np.float32)))
    with pytest.raises(NotImplementedError, match=r"member 'f\.npy' is stored in Fortran order"):
        jask.open_npz(path)


def npy_bytes(array, shape=None):
    """A .npy file of `array`, its header claiming `shape` if given."""
    buf = io.BytesIO()
    header = np.lib.format.header_data_from_array_1_0(array)
    if shape is not None:
        header["shape"] = shape
    np.lib.format.write_array_header_1_0(buf, header)
    buf.write(array.tobytes())
    return buf.getvalue()


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_member_whose_header_claims_more_bytes_is_a_value_error(tmp_path, method):
    path = tmp_path / "lie.npz"
    with zipfile.ZipFile(path, "w", compression=method) as z:
        z.writestr("x.npy", npy_bytes(np.ones((20, 3), np.float32), shape=(25, 3)))
    with pytest.raises(ValueError, match=r"lie\.npz: member 'x\.npy'.*shape \(25, 3\) float32"):
        jask.open_npz(path)


def test_truncated_and_corrupt_archives_are_value_errors(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, a=np.ones(1000, np.float32), b=np.ones(10, np.float32))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"a\.npz: not a readable \.npz \(zip\) archive"):
        jask.open_npz(path)
    # b's local header claims a 64 KB extra field: its bytes would run past the end of the file.
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        extra_len_at = z.getinfo("b.npy").header_offset + 28
    patched = data[:extra_len_at] + b"\xff\xff" + data[extra_len_at + 2 :]
    path.write_bytes(patched)
    with pytest.raises(ValueError, match=r"a\.npz: member 'b\.npy'.*run past the end of the file"):
        jask.open_npz(path)
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="not a readable"):
        jask.open_npz(path)


def test_other_zip_methods_are_not_implemented(tmp_path):
    path = tmp_path / "bz.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as z:
        z.writestr("x.npy", npy_bytes(np.ones(4, np.float32)))
    with pytest.raises(
        NotImplementedError, match=r"member 'x\.npy' is compressed with zip method 12"
    ):
        jask.open_npz(path)


def test_a_corrupt_deflate_stream_is_a_value_error_naming_the_member(tmp_path):
    path = tmp_path / "c.npz"
    np.savez_compressed(path, x=np.arange(5000, dtype=np.float32))
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        at = z.getinfo("x.npy").header_offset + 30 + len("x.npy") + 20 + 2000
    data[at : at + 64] = bytes(64)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"c\.npz.*x\.npy"):
        np.asarray(jask.open_npz(path)["x"])
