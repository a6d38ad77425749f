"""Hostile HDF5 files: each dataset opens with h5py's values or is refused with a ValueError,
TypeError or OSError naming the file.

Regression tests, one per case measured in issue 32: a FIFO or a link to /dev/zero as the file;
a tiny valid file with a huge chunked dataset never written (its chunk table was allocated
whole: 24 GiB here); floats and integers whose bits h5py converts (a 51-bit mantissa, 24 bits of
32) read as if IEEE or whole; a chunk address of 2**63 escaping as OverflowError.

The fuzzer runs every trial in a sandboxed child (tests/fuzz_harness.py), h5py in a child too:
seeded byte mutations of files h5py wrote (contiguous, chunked, gzip + shuffle + fletcher32,
big-endian, float16/32/64, int32, bool, fill values).

What a run of 2 seeds x 150 mutations found (make test now runs 2 x 40, each seed drawing each
of the 5 mutation kinds and 6 datasets; counts by outcome): seed 0: 112 values equal to h5py's,
36 ValueError, 2 NotInFileError; seed 1: 123 values, 26 ValueError, 1
NotInFileError; no crash, hang, unclean error or wrong value after the fixes above.

Structured hostile cases, built with h5py, each against h5py's values (a refusal must name the
file and the dataset): datatypes (63: 20 values, 43 TypeError: ints of every width but int32,
complex, compound, strings, enums over int8, vlen, opaque, arrays, references, longdouble),
shapes (23: 22 values, 1 ValueError: scalar, empty, rank 32, grids of 2**50 chunks of 1 partly
written, a (2**62,) dataset too large), filters (30: 25 values; scaleoffset, lzf, nbit refused),
fill values (19 values, NaN and fill_time="never" included), layouts (16: compact, latest-format
indices: 6 values; virtual and external storage, to /etc/passwd, ../outside, a FIFO, /dev/zero:
10 UnsupportedFileError), links and names (23: 6 values, 5 TypeError for groups, 4
NotInFileError, 2 ValueError for soft-link cycles and chains over 16, 6 UnsupportedFileError for
external links: before the fix Jask followed them, reading another file's offsets in this one,
and would block on a FIFO target). Surgery on the bytes of two valid files (earliest and latest
format; 100 trials each in that run, 30 in make test, every field in each): dims and maxdims to extremes, the
datatype's class and bit fields, the layout's class and address, chunk addresses, sizes, filter
masks and chunk dims: earliest 60 values, 27 NotInFileError, 8 ValueError, 5 UnsupportedFileError;
latest 47 values, 40 NotInFileError, 13 ValueError.

Known gap: a v1 B-tree key whose element-offset coordinate (always 0) is corrupted reads as fill
in h5py (its lookup misses the chunk) but as the stored chunk in Jask (h5py's chunk index, which
Jask reads, reports it); the surgery does not flip bits inside chunk keys for that reason.
"""

from __future__ import annotations

import io
import math
import os
import random
import struct
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from fuzz_harness import DIR, FIFO, Symlink, Trial, check_trials, fuzz_sample, fuzz_trials

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
        for i in range(fuzz_trials(25))
    ]
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    print(f"hdf5 mutation trials (seed {seed}): {dict(counts)}")


# --- structured hostile cases -----------------------------------------------------------------

# Opens and reads a structured case; a refusal must name the dataset too (the file is valid HDF5).
STRICT = """
name = {name!r}
try:
    d = jask.open_hdf5(os.path.join(P, {rel!r}), name)
    out = {{"shape": np.array(d.shape, np.int64), "values": np.asarray(d{index})}}
except (ValueError, TypeError) as e:
    if repr(name) not in str(e):
        raise RuntimeError(f"a refusal that names no dataset: {{e}}") from None
    raise
"""
STRICT_REFERENCE = """
import h5py
with h5py.File(os.path.join(P, {rel!r}), "r") as f:
    d = f[{name!r}]
    v = np.asarray(d{index} if {index!r} else d[()])
    shape = np.array(d.shape, np.int64)
out = {{"shape": shape, "values": v.astype(v.dtype.newbyteorder("<")) if v.dtype.byteorder == ">" else v}}
"""


def case(label, build, name, index="", files=None, reference=True, libver=None):
    """A trial of one dataset of a file h5py builds (`build(f)`), beside `files`."""
    with tempfile.TemporaryDirectory() as folder:  # h5py leaves a BytesIO short of an object ref
        path = os.path.join(folder, FILE)
        with h5py.File(path, "w", libver=libver) as f:
            build(f)
        data = Path(path).read_bytes()
    return Trial(
        label,
        {FILE: data, **(files or {})},
        STRICT.format(rel=FILE, name=name, index=index),
        STRICT_REFERENCE.format(rel=FILE, name=name, index=index) if reference else None,
    )


def dataset(data=None, **kw):
    return lambda f: f.create_dataset("d", data=data, **kw)


INT_TYPES = [f"{o}{k}{n}" for o in "<>" for k in "iu" for n in (1, 2, 4, 8)]
FLOAT_TYPES = [f"{o}f{n}" for o in "<>" for n in (2, 4, 8)]


def datatype_cases():
    rng = np.random.default_rng(0)
    out = []
    for t in INT_TYPES:
        info = np.iinfo(t)
        values = np.array([info.min, info.max, 0, 1, -1 if info.min else 2], dtype=t)
        out.append(case(f"int {t}", dataset(values), "d"))
        out.append(case(f"int {t} chunked", dataset(values, chunks=(2,)), "d"))
    for t in FLOAT_TYPES:
        values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, np.finfo(t).max], dtype=t)
        out.append(case(f"float {t}", dataset(values), "d"))
        out.append(case(f"float {t} gzip", dataset(values, chunks=(3,), compression="gzip"), "d"))
    others = {
        "longdouble": np.ones(3, np.longdouble),
        "bool": rng.random(9) > 0.5,
        "complex64": np.ones(3, np.complex64),
        "complex128": np.ones(3, np.complex128),
        "compound": np.zeros(3, [("a", "<f4"), ("b", ">i4")]),
        "bytes": np.array([b"ab", b"cde"], "S5"),
        "opaque": np.zeros(3, "V8"),
        "subarray": np.zeros(3, [("a", "<f4", (2,))])["a"],
    }
    for label, values in others.items():
        out.append(case(f"dtype {label}", dataset(values), "d"))
    typed = {
        "vlen str": (h5py.string_dtype(), ["a", "bcd"]),
        "fixed ascii": (h5py.string_dtype("ascii", 4), [b"ab", b"cd"]),
        "vlen int": (h5py.vlen_dtype("i4"), None),
        "enum i1": (h5py.enum_dtype({"a": 0, "b": 7}, basetype="i1"), [0, 7]),
        "enum i4": (h5py.enum_dtype({"a": 0, "b": 7, "c": -3}, basetype="<i4"), [0, 7, -3]),
        "enum >i4": (h5py.enum_dtype({"a": 0, "b": 7}, basetype=">i4"), [7, 0]),
        "bool-like enum 0/2": (h5py.enum_dtype({"FALSE": 0, "TRUE": 2}, basetype="i1"), [2, 0]),
        "array (3,) f4": (np.dtype(("<f4", (3,))), np.ones((2, 3), np.float32)),
        "object ref": (h5py.ref_dtype, None),
        "region ref": (h5py.regionref_dtype, None),
    }
    for label, (dt, values) in typed.items():

        def build(f, dt=dt, values=values):
            d = f.create_dataset("d", shape=(2,) if values is None else (len(values),), dtype=dt)
            if values is not None:
                d[...] = values

        out.append(case(f"dtype {label}", build, "d"))

    def refs(f):
        f["x"] = np.ones(3, np.float32)
        d = f.create_dataset("d", shape=(2,), dtype=h5py.ref_dtype)
        d[0] = f["x"].ref

    out.append(case("dtype object ref written", refs, "d"))
    return out


def shape_cases():
    f4 = np.float32
    out = [
        case("scalar", dataset(np.float32(3.5)), "d"),
        case("scalar i4", dataset(np.int32(-7)), "d"),
        case("empty (0,)", dataset(np.zeros(0, f4)), "d"),
        case(
            "empty (0, 5) chunked",
            dataset(shape=(0, 5), dtype=f4, chunks=(2, 5), maxshape=(None, 5)),
            "d",
        ),
        case("empty (5, 0, 3)", dataset(np.zeros((5, 0, 3), f4)), "d"),
        case("ones (1,)*8", dataset(np.ones((1,) * 8, f4)), "d"),
        case("rank 32", dataset(np.arange(2, dtype=f4).reshape((2,) + (1,) * 31)), "d"),
        case("rank 32 chunked", dataset(np.ones((1,) * 32, f4), chunks=(1,) * 32), "d"),
        case("odd (7, 1, 3)", dataset(np.arange(21, dtype=f4).reshape(7, 1, 3)), "d"),
        case("edge chunks", dataset(np.arange(70, dtype=f4).reshape(10, 7), chunks=(3, 4)), "d"),
        case(
            "chunk over shape",
            dataset(np.arange(3, dtype=f4), chunks=(1000,), maxshape=(None,)),
            "d",
        ),
        case(
            "unlimited", dataset(np.arange(15, dtype=f4).reshape(5, 3), maxshape=(None, None)), "d"
        ),
        case("huge maxshape", dataset(np.arange(6, dtype=f4), chunks=(4,), maxshape=(2**62,)), "d"),
        case("too large", dataset(shape=(2**62,), dtype=f4, chunks=(1,)), "d", "[:2]"),
        case(
            "2**60 bytes never written",
            dataset(shape=(2**40, 2**18), dtype=f4, chunks=(1, 2**10), fillvalue=2),
            "d",
            "[-2:, -3:]",
        ),
    ]

    def partly(f):
        d = f.create_dataset("d", shape=(2**30, 4), chunks=(1, 4), dtype="f4", fillvalue=-1)
        d[0], d[7], d[-1] = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]

    for index in ("[:9]", "[2**29:2**29 + 5]", "[-4:]", "[5:9, 1:3]"):
        out.append(case(f"huge grid, 3 chunks written {index}", partly, "d", index))

    def cube(f):
        d = f.create_dataset("d", shape=(2**20, 2**20, 2**10), chunks=(1, 1, 1), dtype="i4")
        d[-1, -1, -1], d[3, 4, 5] = 5, -6

    out.append(case("chunks of 1, grid of 2**50", cube, "d", "[2:5, 3:5, 4:7]"))
    out.append(case("chunks of 1, grid of 2**50, the end", cube, "d", "[-2:, -1:, -3:]"))

    def resized(f):
        d = f.create_dataset("g", data=np.arange(20, dtype=f4), chunks=(3,), maxshape=(None,))
        d.resize((40,))
        d = f.create_dataset("s", data=np.arange(20, dtype=f4), chunks=(3,), maxshape=(None,))
        d.resize((7,))

    out += [case(f"resized {n}", resized, n) for n in ("g", "s")]
    return out


def filter_cases():
    rng = np.random.default_rng(1)
    data = {
        "f4": rng.standard_normal((13, 6)).astype("f4"),
        ">f8": rng.standard_normal((13, 6)).astype(">f8"),
        "i4": rng.integers(-1000, 1000, (13, 6)).astype("i4"),
        "f2": rng.standard_normal((13, 6)).astype("f2"),
        "bool": rng.random((13, 6)) > 0.5,
    }
    out = []
    for level in range(10):
        out.append(
            case(
                f"gzip {level}",
                dataset(data["f4"], chunks=(4, 4), compression="gzip", compression_opts=level),
                "d",
            )
        )
    for label, values in data.items():
        for kw in (
            {"shuffle": True},
            {"fletcher32": True},
            {"shuffle": True, "fletcher32": True, "compression": "gzip"},
        ):
            out.append(case(f"{label} {sorted(kw)}", dataset(values, chunks=(5, 4), **kw), "d"))
    for label, kw in {
        "scaleoffset int": {"scaleoffset": 0},
        "lzf": {"compression": "lzf"},
    }.items():
        out.append(case(label, dataset(data["i4"], chunks=(5, 4), **kw), "d"))
    out.append(case("scaleoffset float", dataset(data["f4"], chunks=(5, 4), scaleoffset=2), "d"))

    def nbit(f):
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((5, 4))
        dcpl.set_filter(h5py.h5z.FILTER_NBIT)
        h5py.h5d.create(f.id, b"d", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((13, 6)), dcpl=dcpl)
        f["d"][...] = data["i4"]

    out.append(case("nbit", nbit, "d"))
    if h5py.h5z.filter_avail(h5py.h5z.FILTER_SZIP):
        out.append(case("szip", dataset(data["i4"], chunks=(5, 4), compression="szip"), "d"))
    return out


def fill_cases():
    out = []
    for label, dt, fill in [
        ("unset f4", "f4", None),
        ("7.5 f4", "f4", 7.5),
        ("NaN f4", "f4", np.nan),
        ("-inf >f8", ">f8", -np.inf),
        ("-0.0 f8", "f8", -0.0),
        ("-1 i4", "i4", -1),
        ("2**31-1 >i4", ">i4", 2**31 - 1),
        ("True bool", "bool", True),
        ("6.5e4 f2", "f2", 65504.0),
    ]:
        for layout in ("chunked", "contiguous"):

            def build(f, dt=dt, fill=fill, layout=layout):
                chunks = (3, 2) if layout == "chunked" else None
                d = f.create_dataset("d", shape=(8, 5), dtype=dt, chunks=chunks, fillvalue=fill)
                if layout == "chunked":
                    d[1:3, 1:3] = 1

            out.append(case(f"fill {label} {layout}", build, "d"))

    def never(f):
        d = f.create_dataset(
            "d", shape=(8, 5), dtype="f4", chunks=(3, 2), fillvalue=4, fill_time="never"
        )
        d[0:3, 0:2] = 1

    out.append(case("fill time never", never, "d", "[0:3, 0:2]"))
    return out


def _compact(f):
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple((3, 4))
    h5py.h5d.create(f.id, b"d", h5py.h5t.IEEE_F64BE, space, dcpl=dcpl)
    f["d"][...] = np.arange(12.0).reshape(3, 4)
    h5py.h5d.create(f.id, b"empty", h5py.h5t.STD_I32LE, space, dcpl=dcpl)


def _virtual(source):
    def build(f):
        f["src"] = np.arange(6, dtype="f4")
        layout = h5py.VirtualLayout(shape=(2, 6), dtype="f4")
        layout[0] = h5py.VirtualSource(".", "src", shape=(6,))
        layout[1] = h5py.VirtualSource(source, "x", shape=(6,))
        f.create_virtual_dataset("d", layout, fillvalue=-1)

    return build


def _external(name: str, size: int):
    """A dataset in external file `name`: written under a placeholder name of the same length
    (h5py never touches the real one), patched in by `patched`."""
    placeholder = "Q" * len(name)

    def build(f):
        f.create_dataset("d", shape=(size // 4,), dtype="<i4", external=[(placeholder, 0, size)])

    return build


def external_case(label, name, files, reference=True):
    t = case(label, _external(name, 64), "d", files=files, reference=reference)
    t.files[FILE] = t.files[FILE].replace(b"Q" * len(name), name.encode())
    return t


def layout_cases():
    raw = np.arange(16, dtype="<i4").tobytes()
    out = [
        case("compact big-endian", _compact, "d"),
        case("compact never written", _compact, "empty"),
        case("contiguous never written", dataset(shape=(5,), dtype="f4", fillvalue=np.nan), "d"),
        case("virtual in file", _virtual("."), "d"),
        case(
            "virtual to a sibling",
            _virtual("b.h5"),
            "d",
            files={"b.h5": h5_bytes(lambda f: f.create_dataset("x", data=np.ones(6, "f4")))},
        ),
        case("virtual to /etc/passwd", _virtual("/etc/passwd"), "d"),
        case("virtual to outside", _virtual("../../outside/notes.txt"), "d"),
        case(
            "virtual to a FIFO", _virtual("fifo.h5"), "d", files={"fifo.h5": FIFO}, reference=False
        ),
        external_case("external beside", "raw.bin", {"raw.bin": raw}),
        external_case("external /etc/passwd", "/etc/passwd", {}),
        external_case("external outside", "../../outside/victim.npy", {}),
        external_case("external FIFO", "fifo", {"fifo": FIFO}, reference=False),
        external_case("external /dev/zero", "/dev/zero", {}, reference=False),
        case(
            "latest format chunked",
            dataset(np.arange(40, dtype="f4").reshape(8, 5), chunks=(3, 2), maxshape=(None, 5)),
            "d",
            libver="latest",
        ),
        case(
            "latest format one chunk",
            dataset(np.arange(40, dtype="f4"), chunks=(40,)),
            "d",
            libver="latest",
        ),
        case(
            "latest format fixed array",
            dataset(np.arange(40, dtype="f4"), chunks=(7,)),
            "d",
            libver="latest",
        ),
    ]
    return out


def link_cases():
    other = h5_bytes(lambda f: f.create_dataset("x", data=np.arange(100, 105, dtype="f4")))

    def links(f):
        f.create_dataset("g/x", data=np.arange(5, dtype="f4"))
        f["soft"] = h5py.SoftLink("/g/x")
        f["g/rel"] = h5py.SoftLink("x")
        f["to_group"] = h5py.SoftLink("/g")
        f["through"] = h5py.SoftLink("/to_group/x")
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["loop_a"], f["loop_b"] = h5py.SoftLink("/loop_b"), h5py.SoftLink("/loop_a")
        for i in range(20):
            f[f"chain{i}"] = h5py.SoftLink(f"/chain{i + 1}" if i < 19 else "/g/x")
        f["ext"] = h5py.ExternalLink("b.h5", "/x")
        f["ext_group"] = h5py.ExternalLink("b.h5", "/")
        f["ext_fifo"] = h5py.ExternalLink("fifo.h5", "/x")
        f["ext_passwd"] = h5py.ExternalLink("/etc/passwd", "/x")
        f["ext_self"] = h5py.ExternalLink(FILE, "/g/x")
        f["soft_to_ext"] = h5py.SoftLink("/ext_group/x")
        f["g"].attrs["big"] = np.zeros(1 << 20, "f8")  # 8 MB: dense attribute storage
        for i in range(300):
            f["g/x"].attrs[f"a{i}"] = np.arange(i % 7)

    files = {"b.h5": other, "fifo.h5": FIFO}
    fifo_reached = {"ext_fifo"}  # h5py would block on the FIFO
    names = [
        "soft",
        "g/rel",
        "through",
        "to_group",
        "dangling",
        "loop_a",
        "chain0",
        "chain5",
        "ext",
        "ext_group/x",
        "ext_fifo",
        "ext_passwd",
        "ext_self",
        "soft_to_ext",
        "/",
        "g",
        "g/",
        "/g//x",
        "./g/./x",
        "",
        ".",
        "g/x/y",
        "nope",
    ]
    return [
        case(f"link {n!r}", links, n, files=files, libver="latest", reference=n not in fifo_reached)
        for n in names
    ]


@pytest.mark.parametrize(
    "cases", [datatype_cases, shape_cases, filter_cases, fill_cases, layout_cases, link_cases]
)
def test_structured_hostile_cases(tmp_path, monkeypatch, cases):
    monkeypatch.setenv("JAX_ENABLE_X64", "1")  # the children see float64 data exactly
    counts = check_trials(fuzz_sample(cases(), 30, 0), tmp_path, preload=PRELOAD)
    print(f"hdf5 structured {cases.__name__}: {dict(counts)}")


# --- structured surgery on the bytes of valid files ----------------------------------------

SURGERY_SHAPE = (37, 11)  # distinctive dims, found as two little-endian uint64s
F4_TYPE = b"\x11\x20\x1f\x00\x04\x00\x00\x00"  # IEEE F32LE: class 1 version 1, bits, size 4
EXTREMES_8 = [0, 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]


def surgery_base(libver):
    """A file with a contiguous and a chunked float32 dataset, and where their fields lie."""
    values = np.arange(math.prod(SURGERY_SHAPE), dtype="f4").reshape(SURGERY_SHAPE)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, FILE)
        with h5py.File(path, "w", libver=libver) as f:
            f.create_dataset("contig", data=values)
            c = f.create_dataset("chunked", data=values, chunks=(5, 4), fillvalue=-1)
            c[10:15, 4:8] = -1  # still stored
            chunk_addresses = [c.id.get_chunk_info(i) for i in range(c.id.get_num_chunks())]
            contig_offset = f["contig"].id.get_offset()
        data = Path(path).read_bytes()
    fields = {
        "dims": _all(data, struct.pack("<2Q", *SURGERY_SHAPE)),
        "dtype": _all(data, F4_TYPE),
        "contig layout": _all(data, b"\x01" + struct.pack("<Q", contig_offset)),
        "chunk address": [
            a for i in chunk_addresses for a in _all(data, struct.pack("<Q", i.byte_offset))
        ],
        "chunk layout": _all(data, struct.pack("<3I", 5, 4, 4)),
    }
    # v1 B-tree keys (earliest format): uint32 size, uint32 filter mask, then the offsets and
    # the child's address; the size lies 8 * (rank + 2) bytes before the address.
    if libver == "earliest":
        fields["chunk size"] = [a - 8 * (len(SURGERY_SHAPE) + 2) for a in fields["chunk address"]]
    return data, {k: v for k, v in fields.items() if v}


def _all(data: bytes, pattern: bytes) -> list[int]:
    out, at = [], data.find(pattern)
    while at >= 0:
        out.append(at)
        at = data.find(pattern, at + 1)
    return out


def surgery(data: bytes, fields: dict, rnd: random.Random) -> tuple[str, bytes]:
    out = bytearray(data)
    field = rnd.choice(sorted(fields))
    at = rnd.choice(fields[field])
    if field == "dims":  # one dim, or the maxdims beside it, to an extreme
        at += 8 * rnd.randrange(4)
        out[at : at + 8] = struct.pack("<Q", rnd.choice([*EXTREMES_8, 36, 38, 2**62]))
    elif field == "dtype":
        byte = rnd.randrange(8)
        out[at + byte] = rnd.choice([rnd.randrange(256), out[at + byte] ^ (1 << rnd.randrange(8))])
        if rnd.random() < 0.3:
            out[at] = (out[at] & 0xF0) | rnd.randrange(16)  # every datatype class
    elif field in ("contig layout", "chunk address"):
        at += 1 if field == "contig layout" else 0
        if rnd.random() < 0.2 and field == "contig layout":
            out[at - 1] = rnd.randrange(256)  # the layout class
        else:
            out[at : at + 8] = struct.pack(
                "<Q", rnd.choice([*EXTREMES_8, len(data), len(data) - 8, rnd.randrange(len(data))])
            )
    elif field == "chunk layout":
        i = rnd.randrange(3)
        out[at + 4 * i : at + 4 * i + 4] = struct.pack(
            "<I", rnd.choice([0, 1, 3, 2**31, 2**32 - 1])
        )
    else:  # "chunk size" and the filter mask after it
        i = rnd.randrange(2)
        out[at + 4 * i : at + 4 * i + 4] = struct.pack(
            "<I", rnd.choice([0, 1, 79, 81, 2**31, 2**32 - 1])
        )
    # And a few bits around it; not in a chunk's B-tree key, whose offsets h5py's reads check but
    # its chunk index does not (a known gap: see the module docstring).
    if field in ("dims", "dtype", "contig layout") and rnd.random() < 0.25:
        for _ in range(rnd.randint(1, 3)):
            out[min(len(out) - 1, max(0, at + rnd.randint(-64, 64)))] ^= 1 << rnd.randrange(8)
    return field, bytes(out)


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_structured_surgery_of_h5py_files(tmp_path, libver):
    data, fields = surgery_base(libver)
    assert {"dims", "dtype", "chunk address"} <= fields.keys(), sorted(fields)
    rnd = random.Random(libver)
    trials = []
    for i in range(fuzz_trials(20)):
        field, mutated = surgery(data, fields, rnd)
        name = rnd.choice(["contig", "chunked"])
        trials.append(trial(f"surgery {libver}/{i} {field}", {FILE: mutated}, name))
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    print(f"hdf5 surgery trials ({libver}, fields {sorted(fields)}): {dict(counts)}")
