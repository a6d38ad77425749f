"""Float64 data with x64 off: every opener gives what jnp.asarray gives (float32), the file unchanged.

With jax_enable_x64 off, `jnp.asarray(np.load(f)).dtype` is float32. A DiskArray opened on float64
data is the same: its dtype is float32 and its values are the file's, rounded as `astype` rounds
them; the file is never rewritten, and `mode="r+"` (whose updates could not reach the file) is
refused naming the file and the fix. The format tests themselves run with x64 on, where each
format's float64 decoding is seen exactly.
"""

import hashlib

import h5py
import jax
import numpy as np
import pytest
import safetensors.numpy
import zarr

import jask

VALUES = np.linspace(-3.0, 3.0, 41).reshape(41, 1) * np.array([1.0, 1 / 3, np.pi])


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def opened(tmp_path, kind):
    """(the opened DiskArray, the files it was opened from)."""
    if kind == "npy":
        np.save(tmp_path / "a.npy", VALUES)
        return jask.DiskArray.open(tmp_path / "a.npy"), [tmp_path / "a.npy"]
    if kind == "raw":
        VALUES.tofile(tmp_path / "a.f64")
        x = jask.DiskArray.open(tmp_path / "a.f64", shape=VALUES.shape, dtype="float64")
        return x, [tmp_path / "a.f64"]
    if kind == "safetensors":
        safetensors.numpy.save_file({"w": VALUES}, tmp_path / "m.safetensors")
        return jask.open_safetensors(tmp_path / "m.safetensors")["w"], [tmp_path / "m.safetensors"]
    if kind in ("npz", "npz deflated"):
        save = np.savez if kind == "npz" else np.savez_compressed
        save(tmp_path / "a.npz", w=VALUES)
        return jask.open_npz(tmp_path / "a.npz")["w"], [tmp_path / "a.npz"]
    if kind in ("hdf5", "hdf5 chunked"):
        with h5py.File(tmp_path / "a.h5", "w") as f:
            f.create_dataset("w", data=VALUES, chunks=(8, 3) if kind == "hdf5 chunked" else None)
        return jask.open_hdf5(tmp_path / "a.h5", "w"), [tmp_path / "a.h5"]
    assert kind == "zarr"
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=VALUES.shape, dtype="f8", chunks=(8, 3))
    z[...] = VALUES
    files = sorted(p for p in (tmp_path / "a.zarr").rglob("*") if p.is_file())
    return jask.open_zarr(tmp_path / "a.zarr"), files


KINDS = ["npy", "raw", "safetensors", "npz", "npz deflated", "hdf5", "hdf5 chunked", "zarr"]


@pytest.mark.parametrize("kind", KINDS)
def test_float64_data_opens_as_jnp_asarray_gives_it_and_the_file_is_unchanged(tmp_path, kind):
    assert not jax.config.jax_enable_x64
    x, files = opened(tmp_path, kind)
    before = {f: digest(f) for f in files}
    want = jax.numpy.asarray(VALUES)
    assert x.dtype == want.dtype == np.float32
    got = np.asarray(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.asarray(want))
    np.testing.assert_array_equal(np.asarray(x + 1), np.asarray(want + 1))
    assert {f: digest(f) for f in files} == before


@pytest.mark.parametrize("kind", ["npy", "safetensors"])
def test_float64_files_opened_for_update_with_x64_off_are_refused_naming_the_file(tmp_path, kind):
    path = tmp_path / ("a.npy" if kind == "npy" else "m.safetensors")
    if kind == "npy":
        np.save(path, VALUES)
    else:
        safetensors.numpy.save_file({"w": VALUES}, path)
    before = digest(path)
    with pytest.raises(TypeError, match=rf"{path.name}.*float64.*jax_enable_x64"):
        if kind == "npy":
            jask.DiskArray.open(path, mode="r+")
        else:
            jask.open_safetensors(path, mode="r+")
    assert digest(path) == before


def test_with_x64_on_float64_data_is_float64(tmp_path):
    with jax.enable_x64(True):
        for kind in KINDS:
            folder = tmp_path / kind.replace(" ", "_")
            folder.mkdir()
            x, _ = opened(folder, kind)
            assert x.dtype == np.float64, kind
            np.testing.assert_array_equal(np.asarray(x), VALUES)
