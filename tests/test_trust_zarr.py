"""Hostile Zarr stores: each opens with zarr-python's values or is refused with a ValueError,
TypeError or OSError naming the store's file.

Every trial runs in a sandboxed child (tests/fuzz_harness.py: address-space and file-size limits,
a timeout, the trial's folder and a folder beside it checked unchanged). The trials:

- regressions, one per case measured in issue 32: a chunk shape whose bytes wrap int64 (whole
  and inside a shard), 2**40 chunks with none stored, FIFOs as chunk, shard and metadata,
  shapes of 2**33, 2**63 and 2**64, uncompressed chunks of the wrong length (edge chunks too),
  metadata of the wrong JSON type, a missing key, deep nesting;
- structured hostile cases: every metadata field of every base store replaced by values of every
  JSON type, keys removed, huge, negative and zero shapes and chunks, codec chains, sharding
  configurations, FIFOs, devices, folders and links in place of every file;
- seeded mutations of stores zarr-python wrote (v2 and v3, with and without sharding; zstd,
  blosc, gzip, bytes, crc32c; missing chunks): JSON values, bytes of chunks, shards and shard
  indexes, truncation, appended and inserted bytes.

Where zarr-python reads a store, Jask returns its dtypes and values (NaN-aware) or refuses the
store; where zarr-python refuses it, Jask refuses it too. Stores holding a FIFO or a link to a
device have no reference (zarr-python would block or read forever): Jask must refuse them.

Found by the first runs, all fixed (jask/formats/zarr.py, src/engine/storage/chunked.cpp,
codecs.cpp): besides issue 32's cases above, Jask read what zarr-python refuses: codec
configurations of the wrong type or range or with unknown keys (zstd level 2**31, checksum null,
a "name" in a configuration), a missing chunk_key_encoding, a v3 fill_value null, a v2 hex fill
value, a v2 .zarray without order or fill_value, dimension_separator null, a corrupt .zattrs,
and a gzip chunk with bytes after its member.
"""

from __future__ import annotations

import functools
import json
import math
import random
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from fuzz_harness import DIR, FIFO, Symlink, Trial, check_trials, fuzz_sample, fuzz_trials
from test_zarr import _data
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec, ZstdCodec

import jask

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # zarr-python's v2 notes

PRELOAD = ("zarr", "numcodecs")

# Reads what Jask opens at P: an array whole when small, else its shape and dtype (a corner
# would be read through a JAX slice, and JAX does not run in a child forked from a process
# that started it); a group's arrays. The in-process tests below read corners of large arrays.
JASK = """
def read(a):
    if a.size > 4096:
        return {"shape": np.array(a.shape), "dtype": np.array(str(a.dtype))}
    return np.asarray(a)
x = jask.open_zarr(P)
out = {k: read(v) for k, v in x.items()} if isinstance(x, dict) else read(x)
"""

# The same with zarr-python, in native byte order (Jask stores big-endian data little-endian).
REFERENCE = """
import zarr
def read(a):
    dtype = a.dtype.newbyteorder("=")
    if a.size > 4096:
        return {"shape": np.array(a.shape), "dtype": np.array(str(dtype))}
    return np.asarray(a[...]).astype(dtype)
node = zarr.open(P, mode="r")
if isinstance(node, zarr.Group):
    out = {n: read(a) for n, a in node.members(max_depth=None) if isinstance(a, zarr.Array)}
else:
    out = read(node)
"""


def _trial(name, files, reference=True, **options) -> Trial:
    """A trial of the store `files`; no reference where zarr-python would block (a FIFO) or
    read a device forever."""
    special = any(f is FIFO or isinstance(f, Symlink) for f in files.values())
    ref = REFERENCE if reference and not special else None
    return Trial(name, files, JASK, ref, **options)


# -- base stores, written by zarr-python ------------------------------------------------------


# name → (shape, dtype, zarr.create_array options, rows written (None: all))
BASES = {
    "v2-raw": ((7, 5), "float32", dict(zarr_format=2, chunks=(3, 2), compressors=None), None),
    "v2-zstd": ((9,), ">f8", dict(zarr_format=2, chunks=(4,), compressors=numcodecs.Zstd()), None),
    "v2-blosc-nested": (
        (6, 5),
        "int32",
        dict(
            zarr_format=2,
            chunks=(4, 3),
            compressors=numcodecs.Blosc(cname="lz4", shuffle=1),
            chunk_key_encoding={"name": "v2", "separator": "/"},
        ),
        None,
    ),
    "v2-gzip-missing": (
        (8, 3),
        "float16",
        dict(zarr_format=2, chunks=(3, 3), compressors=numcodecs.GZip(), fill_value=np.nan),
        slice(0, 3),
    ),
    "v2-raw-order-f": (
        (5, 4),
        "<f4",
        dict(zarr_format=2, chunks=(2, 3), compressors=None, order="F"),
        None,
    ),
    "v3-bytes": ((7, 5), "float32", dict(chunks=(3, 2), compressors=None), None),
    "v3-zstd-crc": (
        (10,),
        "float64",
        dict(
            chunks=(4,),
            serializer=BytesCodec(endian="big"),
            compressors=[ZstdCodec(level=1), Crc32cCodec()],
        ),
        None,
    ),
    "v3-blosc-bool": ((6, 4), "bool", dict(chunks=(4, 3), compressors=BloscCodec()), None),
    "v3-gzip-missing": (
        (9, 4),
        "int32",
        dict(chunks=(2, 4), compressors=GzipCodec(), fill_value=-7),
        slice(0, 3),
    ),
    "v3-sharded": (
        (9, 7),
        "float32",
        dict(
            shards=(4, 6),
            chunks=(2, 3),
            compressors=ZstdCodec(level=1),
            fill_value=np.nan,
        ),
        slice(0, 6),
    ),
    "v3-sharded-raw-start-crc": (
        (7, 6),
        "float32",
        dict(
            chunks=(6, 6),
            serializer=ShardingCodec(
                chunk_shape=(2, 3),
                codecs=[BytesCodec()],
                index_codecs=[BytesCodec(), Crc32cCodec()],
                index_location="start",
            ),
            compressors=None,
        ),
        None,
    ),
}


@functools.cache
def _base(name: str) -> dict:
    """The files (relative path → bytes) of base store `name`."""
    import tempfile

    shape, dtype, options, rows = BASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.zarr"
        data = _data(shape, dtype)
        array = zarr.create_array(store=str(path), shape=shape, dtype=dtype, **options)
        where = rows if rows is not None else ...
        array[where] = data[where]
        return {
            str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        }


@functools.cache
def _group() -> dict:
    """A v3 group holding an array and a group holding another."""
    files = {"zarr.json": json.dumps({"zarr_format": 3, "node_type": "group"}).encode()}
    files |= {f"a/{k}": v for k, v in _base("v3-zstd-crc").items()}
    files |= {f"g/b/{k}": v for k, v in _base("v3-bytes").items()}
    files["g/zarr.json"] = files["zarr.json"]
    return files


def _meta_name(files: dict) -> str:
    return "zarr.json" if "zarr.json" in files else ".zarray"


def _with_meta(base: str, edit) -> dict:
    """Base store `base` with its metadata JSON changed by `edit(meta)` (in place)."""
    files = dict(_base(base))
    meta = json.loads(files[_meta_name(files)])
    edit(meta)
    files[_meta_name(files)] = json.dumps(meta).encode()
    return files


def _set(meta, path, value):
    at = meta
    for key in path[:-1]:
        at = at[key]
    if value is _DELETE:
        del at[path[-1]]
    else:
        at[path[-1]] = value


_DELETE = object()


def _paths(node, prefix=()):
    """Every path (tuple of keys and indexes) in a JSON tree, parents before children."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


# -- regressions: the cases measured in issue 32 ----------------------------------------------


def _v2_meta(shape, chunks, dtype="<f4", compressor=None, **more) -> bytes:
    meta = dict(
        zarr_format=2,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        compressor=compressor,
        fill_value=0.0,
        order="C",
        filters=None,
    )
    return json.dumps(meta | more).encode()


def _v3_meta(shape, chunks, codecs=None, dtype="float32", **more) -> bytes:
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    return json.dumps(meta | more).encode()


def _sharding(inner, index_location="end", crc=False):
    index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if crc:
        index_codecs.append({"name": "crc32c"})
    config = {
        "chunk_shape": inner,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": index_codecs,
        "index_location": index_location,
    }
    return [{"name": "sharding_indexed", "configuration": config}]


def _shard_bytes(chunks: list[bytes | None]) -> bytes:
    """A shard holding `chunks` (None: not stored) with its index at the end."""
    data, index = b"", b""
    for c in chunks:
        if c is None:
            index += b"\xff" * 16
        else:
            index += len(data).to_bytes(8, "little") + len(c).to_bytes(8, "little")
            data += c
    return data + index


F32_12 = np.arange(3, dtype="<f4").tobytes()  # 12 bytes: what a wrapped chunk size asks for


def _regressions() -> list[Trial]:
    wrapped = [2**62 + 1, 3]  # (2**62 + 1) * 3 * 4 bytes is 12 after wrapping int64
    t = [
        _trial("overflow-v2", {".zarray": _v2_meta([2, 3], wrapped), "0.0": F32_12}),
        _trial("overflow-v3", {"zarr.json": _v3_meta([2, 3], wrapped), "c/0/0": F32_12}),
        _trial(
            "overflow-shard-inner",
            {
                "zarr.json": _v3_meta([2, 3], wrapped, _sharding(wrapped)),
                "c/0/0": _shard_bytes([F32_12]),
            },
        ),
        _trial("no-chunks-2**40", {".zarray": _v2_meta([2**20, 2**20], [1, 1])}),
        _trial("no-chunks-2**40-v3", {"zarr.json": _v3_meta([2**20, 2**20], [1, 1])}),
        _trial("fifo-chunk-v2", {".zarray": _v2_meta([4], [2]), "0": FIFO}),
        _trial("fifo-chunk-v3", {"zarr.json": _v3_meta([4], [2]), "c/1": FIFO}),
        _trial("fifo-shard", {"zarr.json": _v3_meta([4], [4], _sharding([2])), "c/0": FIFO}),
        _trial("fifo-zarr-json", {"zarr.json": FIFO}),
        _trial("fifo-zarray", {".zarray": FIFO}),
        _trial("dev-zero-chunk", {".zarray": _v2_meta([4], [2]), "0": Symlink("/dev/zero")}),
        _trial(
            "dev-zero-shard",
            {"zarr.json": _v3_meta([4], [4], _sharding([2])), "c/0": Symlink("/dev/zero")},
        ),
        _trial("dev-zero-zarr-json", {"zarr.json": Symlink("/dev/zero")}),
        _trial("shape-2**33", {".zarray": _v2_meta([2**33], [1])}),
        _trial("shape-2**63", {".zarray": _v2_meta([2**63], [1])}),
        _trial("shape-2**64", {"zarr.json": _v3_meta([2**64], [1])}),
        _trial("shape-2**63-1", {"zarr.json": _v3_meta([2**63 - 1], [1])}),
        _trial("missing-key-name", {"zarr.json": _v3_meta([4], [2], chunk_grid={})}),
        _trial("deep-json", {"zarr.json": b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"}),
        _trial("shape-is-a-dict", {"zarr.json": _v3_meta({"a": 1}, [2])}),
        _trial("data-type-is-a-list", {"zarr.json": _v3_meta([4], [2], dtype=["float32"])}),
        _trial("fill-is-a-list", {"zarr.json": _v3_meta([4], [2], fill_value=[0])}),
        _trial("codec-is-a-list", {"zarr.json": _v3_meta([4], [2], codecs=[["bytes"]])}),
        _trial(
            "shard-index-2**40",
            {
                "zarr.json": _v3_meta([2**20, 2**20], [2**20, 2**20], _sharding([1, 1])),
                "c/0/0": b"\0" * 64,
            },
        ),
    ]
    # Uncompressed chunks of the wrong length; zarr-python refuses each.
    f32 = lambda n: np.arange(n, dtype="<f4").tobytes()  # noqa: E731
    for name, stored in {
        "extra-bytes": [f32(3), f32(2), f32(2)],
        "inserted-bytes": [f32(2)[:2] + b"\0\0\0\0" + f32(2)[2:], f32(2), f32(2)],
        "short-chunk": [f32(1), f32(2), f32(2)],
        "short-edge-chunk": [f32(2), f32(2), f32(1)],  # shape 5: the edge chunk holds 1 value
        "long-edge-chunk": [f32(2), f32(2), f32(3)],
    }.items():
        t.append(
            _trial(
                f"{name}-v2",
                {".zarray": _v2_meta([5], [2]), **{str(i): c for i, c in enumerate(stored)}},
            )
        )
        t.append(
            _trial(
                f"{name}-v3",
                {"zarr.json": _v3_meta([5], [2]), **{f"c/{i}": c for i, c in enumerate(stored)}},
            )
        )
        t.append(
            _trial(
                f"{name}-shard",
                {"zarr.json": _v3_meta([5], [6], _sharding([2])), "c/0": _shard_bytes(stored)},
            )
        )
    return t


# -- structured hostile cases -----------------------------------------------------------------

# One value of each JSON type, and the numbers that break sizes.
VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1,
    3,
    2**31,
    2**62 + 1,
    2**63,
    2**64,
    -(2**63),
    1.5,
    1e308,
    math.nan,
    "",
    "x",
    "NaN",
    "0x7fc00000",
    [],
    [0],
    [-1],
    [2**63],
    [[1]],
    {},
    {"name": "x"},
]


def _type_confusion(base: str) -> list[Trial]:
    """Every field (nested too) of `base`'s metadata replaced by every value in VALUES, and
    every key removed."""
    files = _base(base)
    meta = json.loads(files[_meta_name(files)])
    trials = []
    for path in list(_paths(meta))[1:]:
        for value in VALUES + [_DELETE] * isinstance(path[-1], str):

            def edit(m, path=path, value=value):
                _set(m, path, value)

            label = "del" if value is _DELETE else repr(value)[:20]
            trials.append(
                _trial(f"{base}:{'.'.join(map(str, path))}={label}", _with_meta(base, edit))
            )
    return trials


def _sizes() -> list[Trial]:
    """Shapes and chunk shapes: huge, negative, zero, mismatched, past a chunk's bytes."""
    shapes = [[], [0], [5], [0, 3], [2**31, 2**31], [2**62], [2**63 - 1], [-1], [5, 2**40]]
    chunks = [[], [0], [1], [2], [7], [-2], [2**62 + 1], [2**61], [1, 1], [2**32, 2**32]]
    trials = []
    for s in shapes:
        for c in chunks:
            files = {".zarray": _v2_meta(s, c), ".".join(["0"] * len(c)) or "0": F32_12}
            trials.append(_trial(f"v2 shape {s} chunks {c}", files))
            files = {"zarr.json": _v3_meta(s, c), "/".join(["c"] + ["0"] * len(c)): F32_12}
            trials.append(_trial(f"v3 shape {s} chunks {c}", files))
    for inner in ([1], [2], [3], [0], [2**62 + 1], [2**40]):
        for outer in ([4], [2**62 + 2], [2**40]):
            files = {
                "zarr.json": _v3_meta([4], outer, _sharding(inner)),
                "c/0": _shard_bytes([F32_12[:8], None]),
            }
            trials.append(_trial(f"shard {outer} of {inner}", files))
    return trials


def _codec_chains() -> list[Trial]:
    b = {"name": "bytes", "configuration": {"endian": "little"}}
    chains = [
        [],
        [b, b],
        [{"name": "zstd"}],
        [b, {"name": "lzma"}],
        [b, {"name": "crc32c"}],
        [{"name": "transpose", "configuration": {"order": [1, 0]}}, b],
        [{"name": "transpose", "configuration": {"order": [0, 0]}}, b],
        [{"name": "transpose", "configuration": {"order": "C"}}, b],
        [b, {"name": "zstd", "configuration": {"level": "x"}}],
        [b, {"name": "blosc", "configuration": 5}],
        [b, {"name": "gzip", "configuration": None}],
        [{"name": "bytes", "configuration": {"endian": "middle"}}],
        [{"name": "bytes", "configuration": []}],
        _sharding([2, 2]) + [b],
        [b] + _sharding([2, 2]),
        [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [2, 2],
                    "codecs": _sharding([1, 1]),
                    "index_codecs": [b],
                },
            }
        ],
    ]
    chunk = np.arange(4, dtype="<f4").tobytes()
    trials = []
    for i, codecs in enumerate(chains):
        files = {"zarr.json": _v3_meta([2, 2], [2, 2], codecs), "c/0/0": chunk}
        trials.append(_trial(f"codecs {i}: {json.dumps(codecs)[:60]}", files))
    for i, config in enumerate(
        [
            {"chunk_shape": [2]},
            {"chunk_shape": [2], "codecs": [b]},
            {"chunk_shape": [2], "codecs": [b], "index_codecs": []},
            {"chunk_shape": [2], "codecs": [b], "index_codecs": [b, b]},
            {"chunk_shape": [2], "codecs": [b], "index_codecs": [{"name": "crc32c"}, b]},
            {"chunk_shape": [2], "codecs": [b], "index_codecs": [b], "index_location": "middle"},
            {"chunk_shape": [2, 2], "codecs": [b], "index_codecs": [b]},
            {"chunk_shape": [3], "codecs": [b], "index_codecs": [b]},
        ]
    ):
        codecs = [{"name": "sharding_indexed", "configuration": config}]
        files = {"zarr.json": _v3_meta([4], [4], codecs), "c/0": _shard_bytes([chunk[:8]] * 2)}
        trials.append(_trial(f"sharding config {i}", files))
    return trials


def _special_files() -> list[Trial]:
    """Every file of a few base stores replaced by a FIFO, a device, a folder, a dangling link
    or nothing; and folders replaced by links back up the tree."""
    trials = []
    for base in ("v2-raw", "v3-zstd-crc", "v3-sharded", "v2-blosc-nested"):
        files = _base(base)
        for rel in files:
            for kind, special in [
                ("fifo", FIFO),
                ("dev-zero", Symlink("/dev/zero")),
                ("dir", DIR),
                ("dangling", Symlink("nowhere")),
                ("gone", None),
            ]:
                changed = {k: v for k, v in files.items() if k != rel}
                if special is not None:
                    changed[rel] = special
                # A dangling link or a missing chunk reads as fill in both.
                reference = kind in ("dangling", "gone")
                trials.append(_trial(f"{base}:{rel}={kind}", changed, reference=reference))
    loops = {
        ".zarray": _v2_meta([4, 4], [2, 2], dimension_separator="/"),
        "0/0": F32_12[:4] * 4,
        "1": Symlink("."),
    }
    trials.append(_trial("v2 chunk folder linked to itself", loops))
    loops = {"zarr.json": _v3_meta([4, 4], [2, 2]), "c/0/0": F32_12[:4] * 4, "c/1": Symlink("..")}
    trials.append(_trial("v3 chunk folder linked up", loops))
    group = dict(_group())
    group["g/loop"] = Symlink("..")
    trials.append(_trial("group linked to its parent", group))
    group = dict(_group())
    group["g/b/zarr.json"] = FIFO
    trials.append(_trial("group's array's zarr.json a FIFO", group))
    return trials


# -- seeded mutations of zarr-python's stores -------------------------------------------------


def _mutate_json(meta, rng: random.Random):
    paths = list(_paths(meta))[1:]
    path = rng.choice(paths)
    choice = rng.random()
    if choice < 0.6:
        _set(meta, path, rng.choice(VALUES))
    elif choice < 0.8 and isinstance(path[-1], str):
        _set(meta, path, _DELETE)
    else:  # a number nudged: sizes, levels, indexes
        at = meta
        for key in path[:-1]:
            at = at[key]
        value = at[path[-1]]
        if isinstance(value, int) and not isinstance(value, bool):
            at[path[-1]] = value + rng.choice([-2, -1, 1, 2, value, 2**32])
        else:
            _set(meta, path, rng.choice(VALUES))


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    kind = rng.randrange(6)
    if not data or kind == 0:
        return bytes(data) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    at = rng.randrange(len(data))
    if kind == 1:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 2:
        del data[at:]
    elif kind == 3:
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == 4:
        del data[at : at + rng.randint(1, 8)]
    else:
        data[at] = rng.randrange(256)
    return bytes(data)


def _json_or_none(data: bytes):
    try:
        meta = json.loads(data)
    except ValueError:  # bytes mutated before
        return None
    return meta if isinstance(meta, dict) else None


def _mutation_trials(n: int, seed: int) -> list[Trial]:
    rng = random.Random(seed)
    trials = []
    for i in range(n):
        base = rng.choice(sorted(BASES) + ["group"])
        files = dict(_group() if base == "group" else _base(base))
        metas = [k for k in files if Path(k).name in ("zarr.json", ".zarray")]
        what = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            rel = rng.choice(metas) if rng.random() < 0.5 else rng.choice(sorted(files))
            meta = _json_or_none(files[rel]) if Path(rel).name in ("zarr.json", ".zarray") else None
            if meta is not None and rng.random() < 0.7:
                _mutate_json(meta, rng)
                files[rel] = json.dumps(meta).encode()
                what.append(f"json {rel}")
            else:
                files[rel] = _mutate_bytes(files[rel], rng)
                what.append(f"bytes {rel}")
        trials.append(_trial(f"mutation {seed}:{i} {base}: {', '.join(what)}", files))
    return trials


# -- the tests ----------------------------------------------------------------------------------


def test_valid_base_stores_open_with_zarr_pythons_values(tmp_path):
    trials = [_trial(name, _base(name)) for name in BASES] + [_trial("group", _group())]
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    assert counts == {"values": len(trials)}, counts


def test_issue_32_regressions(tmp_path):
    counts = check_trials(_regressions(), tmp_path, preload=PRELOAD)
    print(f"regression trials: {dict(counts)}")
    assert counts["values"] >= 2  # the arrays with nothing stored read as fill


def test_structured_hostile_metadata(tmp_path):
    # Every field of three stores against every value: a thousand trials; all of them when
    # JASK_FUZZ_TRIALS is that many.
    bases = ("v2-raw", "v3-zstd-crc", "v3-sharded", "v3-blosc-bool")
    trials = fuzz_sample([t for base in bases for t in _type_confusion(base)], 60, 0)
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    print(f"type confusion trials: {dict(counts)}")
    assert counts["values"] > 0 and counts["refused: ValueError"] > 0


def test_structured_sizes_codecs_and_special_files(tmp_path):
    trials = fuzz_sample(_sizes() + _codec_chains() + _special_files(), 70, 0)
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    print(f"sizes, codecs and special file trials: {dict(counts)}")
    assert counts["values"] > 0 and counts["refused: ValueError"] > 0


@pytest.mark.parametrize("seed", [1])
def test_seeded_mutations_of_zarr_python_stores(tmp_path, seed):
    counts = check_trials(_mutation_trials(fuzz_trials(25), seed), tmp_path, preload=PRELOAD)
    print(f"mutation trials (seed {seed}): {dict(counts)}")
    assert counts["values"] > 0 and counts["refused: ValueError"] > 0


# -- in-process checks of what the trials only see from outside ------------------------------


def test_2_to_the_40_chunks_with_none_stored_open_fast_and_read_fill(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    (path / ".zarray").write_bytes(_v2_meta([2**20, 2**20], [1, 1], fill_value=2.5))
    (path / "7.9").write_bytes(np.float32(-1).tobytes())
    x = jask.open_zarr(path)  # (the grid's 2**40 keys are never listed: its trial has a timeout)
    got = np.asarray(x[6:9, 8:11])
    want = np.full((3, 3), 2.5, np.float32)
    want[1, 1] = -1
    np.testing.assert_array_equal(got, want)


def test_wrapped_chunk_size_names_the_file_and_the_bytes(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    (path / ".zarray").write_bytes(_v2_meta([2, 3], [2**62 + 1, 3]))
    (path / "0.0").write_bytes(F32_12)
    with pytest.raises(ValueError, match=r"\.zarray: a chunk of .* bytes, more than"):
        jask.open_zarr(path)


@pytest.mark.parametrize("stored", [3, 1], ids=["long", "short"])
def test_uncompressed_chunk_of_the_wrong_length_is_refused_as_zarr_python_refuses(tmp_path, stored):
    path = tmp_path / "a.zarr"
    path.mkdir()
    (path / ".zarray").write_bytes(_v2_meta([4], [2]))
    (path / "0").write_bytes(np.arange(stored, dtype="<f4").tobytes())
    with pytest.raises(ValueError):
        zarr.open_array(str(path), mode="r")[...]
    with pytest.raises(ValueError, match=rf"chunk \(0,\).* holds {4 * stored} bytes.* exactly 8"):
        np.asarray(jask.open_zarr(path))


def test_wrong_json_types_name_the_file_and_key(tmp_path):
    path = tmp_path / "a.zarr"
    path.mkdir()
    for meta, match in [
        (_v3_meta([4], [2], dtype=["float32"]), "zarr dtype"),
        (_v3_meta([4], [2], chunk_grid={"configuration": {"chunk_shape": [2]}}), "no 'name'"),
        (_v3_meta([4], [2], chunk_grid=[1]), "chunk_grid must be a JSON object"),
        (_v3_meta([4], [2], fill_value=[0]), "invalid fill_value"),
        (_v3_meta([4], [2], codecs=[{"name": "bytes", "configuration": 3}]), "configuration"),
        (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    ]:
        (path / "zarr.json").write_bytes(meta)
        with pytest.raises((ValueError, TypeError), match=match) as info:
            jask.open_zarr(path)
        assert "zarr.json" in str(info.value)


def test_a_sparse_shard_claiming_a_huge_index_is_refused_by_the_budget_before_it_is_read(tmp_path):
    # A shard of 2**32 inner chunks has a 64 GiB index; a sparse file claims that size for free.
    # It was read whole with one os.pread: a bare MemoryError() naming nothing (or, within the
    # address space, gigabytes of zeros read past the memory budget).
    n = 2**16
    path = tmp_path / "a.zarr"
    (path / "c" / "0").mkdir(parents=True)
    (path / "zarr.json").write_bytes(_v3_meta([n, n], [n, n], codecs=_sharding([1, 1])))
    with open(path / "c" / "0" / "0", "wb") as f:
        f.truncate(16 * n * n)
    with pytest.raises(MemoryError, match=r"c/0/0: its index of 4294967296 inner chunks.*budget"):
        jask.open_zarr(path)
