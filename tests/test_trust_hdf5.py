"""Hostile HDF5 files: each dataset opens with h5py's values or is refused with a ValueError,
TypeError or OSError naming the file.

Regression tests, one per case measured in issue 32: a FIFO or a link to /dev/zero as the file;
a tiny valid file with a huge chunked dataset never written (its chunk table was allocated
whole: 24 GiB here); floats and integers whose bits h5py converts (a 51-bit mantissa, 24 bits of
32) read as if IEEE or whole; a chunk address of 2**63 escaping as OverflowError.

The fuzzer runs every trial in a sandboxed child (tests/fuzz_harness.py), h5py in a child too:
seeded byte mutations of files h5py wrote (contiguous, chunked, gzip + shuffle + fletcher32,
big-endian, float16/32/64, int32, bool, fill values).

What the default run found (2 seeds x 150 mutations; counts by outcome): seed 0: 112 values
equal to h5py's, 36 ValueError, 2 NotInFileError; seed 1: 123 values, 26 ValueError, 1
NotInFileError; no crash, hang, unclean error or wrong value after the fixes above.
"""

from __future__ import annotations

import io
import random
import struct

import h5py
import numpy as np
import pytest
from fuzz_harness import DIR, FIFO, Symlink, Trial, check_trials, fuzz_trials

import jask

FILE = "a.h5"
PRELOAD = ("h5py",)
JASK = "out = jask.open_hdf5(os.path.join(P, {rel!r}), {name!r})"
# h5py's values, as Jask returns them: little-endian.
REFERENCE = """
import h5py
with h5py.File(os.path.join(P, {rel!r}), "r") as f:
    v = np.asarray(f[{name!r}][()])
out = v.astype(v.dtype.newbyteorder("<")) if v.dtype.byteorder == ">" else v
"""


def trial(name, files, dataset, rel=FILE, reference=True):
    ref = REFERENCE.format(rel=rel, name=dataset) if reference else None
    return Trial(name, files, JASK.format(rel=rel, name=dataset), ref)


def h5_bytes(build) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        build(f)
    return buf.getvalue()


# --- regression tests -----------------------------------------------------------------------


def test_fifos_devices_and_folders_are_refused_before_a_read(tmp_path):
    valid = h5_bytes(lambda f: f.create_dataset("x", data=np.arange(5, dtype=np.float32)))
    trials = [
        trial("fifo", {FILE: FIFO}, "x", reference=False),  # h5py blocks on it
        trial("link to /dev/zero", {FILE: Symlink("/dev/zero")}, "x", reference=False),
        trial("folder", {FILE: DIR}, "x"),
        trial("link to a valid file", {"real.h5": valid, FILE: Symlink("real.h5")}, "x"),
    ]
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    assert counts == {"refused: NotRegularFileError": 3, "values": 1}, counts


def test_a_huge_chunked_dataset_never_written_reads_its_fill_value(tmp_path):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(2**30,), chunks=(1,), dtype="f4", fillvalue=1.5)
    x = jask.open_hdf5(path, "x")  # a table of 2**30 chunks was 24 GiB
    with h5py.File(path) as f:
        np.testing.assert_array_equal(np.asarray(x[-3:]), f["x"][-3:])


def test_a_huge_chunk_grid_partly_written_reads_its_chunks_and_fill_elsewhere(
    tmp_path, small_budget
):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("y", shape=(2**30, 4), chunks=(1, 4), dtype="f4", fillvalue=-2)
        d[5] = [1, 2, 3, 4]
        d[6] = [5, 6, 7, 8]
        d[2**30 - 1] = [9, 10, 11, 12]
        f.create_dataset("z", shape=(2**30,), chunks=(1,), dtype="f4")[5] = 3
    small_budget("1MB")  # a dense table of the grid would be 24 GiB; it was refused
    y, z = jask.open_hdf5(path, "y"), jask.open_hdf5(path, "z")
    with h5py.File(path) as f:
        assert (y.shape, y.dtype) == (f["y"].shape, f["y"].dtype)
        for rows in (slice(3, 9), slice(2**30 - 3, None), slice(2**29, 2**29 + 4)):
            np.testing.assert_array_equal(np.asarray(y[rows]), f["y"][rows])
        np.testing.assert_array_equal(np.asarray(z[:8]), f["z"][:8])


def test_datatypes_whose_bits_h5py_converts_are_refused_by_name(tmp_path):
    path = tmp_path / "a.h5"
    space = h5py.h5s.create_simple((4,))
    with h5py.File(path, "w") as f:
        odd = h5py.h5t.IEEE_F64LE.copy()
        odd.set_fields(63, 52, 11, 1, 51)  # a 51-bit mantissa
        h5py.h5d.create(f.id, b"f51", odd, space)
        f["f51"][...] = [1.0, 2.5, -3.0, 1e10]
        i24 = h5py.h5t.STD_I32LE.copy()
        i24.set_precision(24)
        h5py.h5d.create(f.id, b"i24", i24, space)
        f["i24"][...] = [1, -2, 3, 4]
        f["ok"] = np.array([1.0, 2.5, -3.0, 1e10])
    with h5py.File(path) as f:
        assert f["f51"].dtype == np.float64 and f["i24"].dtype == np.int32  # converted
    with pytest.raises(ValueError, match=r"a\.h5: dataset 'f51'.*51-bit mantissa.*not IEEE"):
        jask.open_hdf5(path, "f51")
    with pytest.raises(ValueError, match=r"a\.h5: dataset 'i24'.*24 significant bits"):
        jask.open_hdf5(path, "i24")
    with h5py.File(path) as f:
        np.testing.assert_array_equal(np.asarray(jask.open_hdf5(path, "ok")), f["ok"][()])


def test_a_chunk_address_past_int64_is_a_value_error_naming_the_dataset(tmp_path):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("c", data=np.arange(100, dtype="f4"), chunks=(10,))
        address = f["c"].id.get_chunk_info(3).byte_offset
    data = bytearray(path.read_bytes())
    at = data.find(struct.pack("<Q", address))
    data[at : at + 8] = struct.pack("<Q", 2**63)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"a\.h5: dataset 'c': the chunk at \(30,\).*outside"):
        jask.open_hdf5(path, "c")


def test_a_missing_dataset_is_a_key_error_and_a_value_error(tmp_path):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.ones(3, np.float32)
    for kind in (KeyError, ValueError):
        with pytest.raises(kind, match=r"a\.h5: no dataset named 'nope'"):
            jask.open_hdf5(path, "nope")


# --- fuzzer -----------------------------------------------------------------------------------


def base_files(rng):
    def build(f):
        f.create_dataset("contig", data=rng.standard_normal((20, 7)).astype(np.float32))
        f.create_dataset(
            "gzip",
            data=rng.standard_normal((30, 9)),
            chunks=(7, 4),
            compression="gzip",
            shuffle=True,
            fletcher32=True,
        )
        f.create_dataset("be", data=np.arange(-50, 50, dtype=">i4"), chunks=(16,))
        f.create_dataset("f16", data=rng.standard_normal(33).astype(np.float16))
        f.create_dataset("b", data=rng.random(17) > 0.5)
        d = f.create_dataset("fill", shape=(40,), chunks=(8,), dtype="f4", fillvalue=-7)
        d[8:16] = 1.5

    return h5_bytes(build), ["contig", "gzip", "be", "f16", "b", "fill"]


def seeded_mutation(data: bytes, rnd: random.Random) -> bytes:
    out = bytearray(data)
    kind = rnd.randrange(5)
    if kind == 0:
        for _ in range(rnd.randint(1, 4)):
            out[rnd.randrange(len(out))] ^= 1 << rnd.randrange(8)
    elif kind == 1:  # a field (an address, a size) to an extreme value
        size = rnd.choice([2, 4, 8])
        at = rnd.randrange(len(out) - size)
        value = rnd.choice(
            [0, 1, 2 ** (8 * size - 1), 2 ** (8 * size) - 1, rnd.getrandbits(8 * size)]
        )
        out[at : at + size] = value.to_bytes(size, "little")
    elif kind == 2:
        del out[rnd.randrange(len(out)) :]
    elif kind == 3:
        at = rnd.randrange(len(out))
        out[at : at + 8] = rnd.randbytes(8)
    else:
        out += rnd.randbytes(rnd.randint(1, 500))
    return bytes(out)


def test_valid_files_open_with_h5pys_values(tmp_path):
    data, names = base_files(np.random.default_rng(0))
    counts = check_trials(
        [trial(f"valid {n}", {FILE: data}, n) for n in names], tmp_path, preload=PRELOAD
    )
    assert counts == {"values": len(names)}, counts


@pytest.mark.parametrize("seed", [0, 1])
def test_seeded_mutations_of_h5py_files(tmp_path, seed):
    data, names = base_files(np.random.default_rng(seed))
    rnd = random.Random(seed)
    trials = [
        trial(f"mutation {seed}/{i}", {FILE: seeded_mutation(data, rnd)}, rnd.choice(names))
        for i in range(fuzz_trials(150))
    ]
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    print(f"hdf5 mutation trials (seed {seed}): {dict(counts)}")
