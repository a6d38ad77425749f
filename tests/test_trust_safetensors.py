"""Hostile safetensors files and checkpoints: each opens with the safetensors library's values or
is refused with a ValueError, TypeError or OSError naming the file.

Every trial runs in a sandboxed child (tests/fuzz_harness.py: address-space and file-size limits,
a timeout, the trial's folder and a folder beside it checked unchanged). The trials:

- structured hostile cases: every header field of every type, dtype names, shapes, offsets,
  `__metadata__`, header lengths; indexes whose weight_map is of the wrong type or names shards
  out of the folder, FIFOs, devices, folders, links, missing shards, a tensor in two shards;
- seeded byte mutations of files `safetensors.numpy.save_file` wrote (every dtype it writes, and
  bfloat16 and the float8s) and of sharded checkpoints: characters and numbers in the header, its
  length field, truncation, bytes appended, data bytes.

Where the library (safetensors.numpy.load_file; for bfloat16 and the float8s, which NumPy has no
dtype for, safetensors.deserialize) reads a file, Jask returns its dtypes and values or refuses
the file; where the library refuses a file, Jask refuses it. A sharded checkpoint's reference
reads the index with `json` and each shard with the library, as Hugging Face loaders do.

The .npy cases of the same issue follow, with seeded mutations of np.save files against
numpy.load on the same harness.

What the fuzzers found (JASK_FUZZ_TRIALS scales the mutation trials): Python's json reads what
serde_json (the library's parser) refuses, so Jask opened files the library refuses: NaN, 1e400,
integers past 64 bits, -0, lone surrogate escapes, nesting past 127 levels; it also opened files
with gaps between tensors or bytes after the last one, and a tensor of 5000 dimensions that
np.asarray could not read. All are refused now.
"""

from __future__ import annotations

import io
import json
import math
import random
import re

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
from fuzz_harness import DIR, FIFO, Symlink, Trial, check_trials, fuzz_sample, fuzz_trials

import jask

INDEX = "model.safetensors.index.json"

# Sets `out` to the tensors and metadata Jask reads from `path` (a file, folder or index). With
# x64 on, the file's own dtypes are compared (with it off, JAX holds float64 as float32).
JASK = """
jax.config.update("jax_enable_x64", True)
path = os.path.join(P, {rel!r})
out = {{
    "tensors": jask.open_safetensors(path),
    "metadata": {{k: np.asarray(v) for k, v in jask.safetensors_metadata(path).items()}},
}}
"""

# The library's values: safetensors.numpy has no bfloat16 or float8 (it names NumPy dtypes that do
# not exist: a TypeError or an AttributeError), so a file holding one is read with the library's
# parser and its bytes viewed as the ml_dtypes type the library's safe_open names (F8_E4M3 is
# float8_e4m3fn). F4 packs two values to a byte (float4_e2m1fn_x2): no reference values.
REFERENCE_LOAD = """
import ml_dtypes, safetensors, safetensors.numpy

DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "I64": np.int64, "U64": np.uint64, "I32": np.int32, "U32": np.uint32, "I16": np.int16,
    "U16": np.uint16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_, "C64": np.complex64,
    "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
    "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "F8_E8M0": ml_dtypes.float8_e8m0fnu,
}

def load(path):
    try:
        return safetensors.numpy.load_file(path)
    except (TypeError, AttributeError):
        with open(path, "rb") as f:
            parsed = safetensors.deserialize(f.read())
        return {name: np.frombuffer(t["data"], DTYPES[t["dtype"]]).reshape(t["shape"])
                for name, t in parsed}

def metadata(path):
    with safetensors.safe_open(path, "np") as f:
        return {k: np.asarray(v) for k, v in (f.metadata() or {}).items()}
"""

# The library's values of the file at `rel`.
REFERENCE_FILE = """
path = os.path.join(P, {rel!r})
out = {{"tensors": load(path), "metadata": metadata(path)}}
"""

# A checkpoint as Hugging Face loaders read it: the index's weight_map, each shard it names.
REFERENCE_CHECKPOINT = """
import json
with open(os.path.join(P, "model.safetensors.index.json")) as f:
    weight_map = json.load(f)["weight_map"]
tensors, first = {}, None
for shard in sorted(set(weight_map.values())):
    held = load(os.path.join(P, shard))
    first = first or shard
    tensors |= {name: held[name] for name, s in weight_map.items() if s == shard}
meta = metadata(os.path.join(P, first)) if first else {}
out = {"tensors": tensors, "metadata": meta}
"""

BF16 = np.dtype(ml_dtypes.bfloat16)
# The safetensors names of the dtypes NumPy lacks (safetensors.numpy writes none of them).
BY_HAND = {
    BF16: "BF16",
    np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3",
    np.dtype(ml_dtypes.float8_e5m2): "F8_E5M2",
    np.dtype(ml_dtypes.float8_e4m3fnuz): "F8_E4M3FNUZ",
    np.dtype(ml_dtypes.float8_e5m2fnuz): "F8_E5M2FNUZ",
    np.dtype(ml_dtypes.float8_e8m0fnu): "F8_E8M0",
}
# Every dtype safetensors.numpy writes, and the float8s: Jask stores all but float8_e8m0fnu. The
# first five (and bfloat16) mix in the first files; each other one has a file of its own.
STORED = ("float32", "float16", "float64", "int32", "bool")
STORED_ALONE = ("int64", "uint64", "uint32", "int16", "uint16", "int8", "uint8", "complex64")
STORED_ALONE += tuple(k for k, v in BY_HAND.items() if v.startswith("F8_") and v != "F8_E8M0")
NOT_STORED = (np.dtype(ml_dtypes.float8_e8m0fnu),)
LIBRARY_DTYPES = (
    "BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I16 U16 F16 "
    "BF16 I32 U32 F32 C64 F64 I64 U64"
).split()


def _values(rng: np.random.Generator, dtype, shape) -> np.ndarray:
    """Values of `dtype` and `shape`: the extremes of ints, NaN, infinities and -0.0 of floats."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True))
    if dtype.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape), dtype)
    values = np.asarray(rng.standard_normal(shape)).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32).astype(dtype)
    flat = values.reshape(-1)
    flat[: min(flat.size, 4)] = special[: min(flat.size, 4)]
    return values


def _raw_file(header: dict | str | bytes, data: bytes, *, length: int | None = None) -> bytes:
    """A safetensors file of `header` (any claims) and `data`; `length` overrides the length field."""
    if isinstance(header, dict):
        header = json.dumps(header)
    if isinstance(header, str):
        header = header.encode()
    n = len(header) if length is None else length
    return n.to_bytes(8, "little") + header + data


def _saved(tensors: dict, metadata: dict | None = None) -> bytes:
    """The bytes safetensors.numpy.save_file writes (bfloat16 and float8 tensors by hand, as it
    has none)."""
    by_hand = {k: v for k, v in tensors.items() if v.dtype in BY_HAND}
    plain = {k: v for k, v in tensors.items() if v.dtype not in BY_HAND}
    data = safetensors.numpy.save(plain, metadata=metadata)
    if not by_hand:
        return data
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    for name, value in by_hand.items():
        header[name] = {
            "dtype": BY_HAND[value.dtype],
            "shape": list(value.shape),
            "data_offsets": [len(body), len(body) + value.nbytes],
        }
        body += value.tobytes()
    return _raw_file(header, body)


def _base_files(rng: np.random.Generator) -> list[bytes]:
    """Valid files: dtypes mixed (values compared), each other dtype alone, uint8 mixed in."""
    shapes = [(3, 5), (7,), (), (0, 4), (2, 1, 3), (1,)]
    stored = [*STORED, BF16]
    files = []
    for i in range(4):
        names = [f"t{j}.{'w' * j}" for j in range(2 + i)]
        tensors = {
            name: _values(rng, stored[(i + j) % len(stored)], shapes[(i + j) % len(shapes)])
            for j, name in enumerate(names)
        }
        metadata = {"format": "np", "note": "ü"} if i % 2 else None
        files.append(_saved(tensors, metadata))
    for dtype in STORED_ALONE + NOT_STORED:
        files.append(_saved({"x": _values(rng, dtype, (2, 3))}))
    files.append(_saved({"a": _values(rng, "float32", (4,)), "b": _values(rng, "uint8", (5,))}))
    return files


def _checkpoint(rng: np.random.Generator) -> dict:
    """A checkpoint in three shards as Hugging Face writes them: {file name: bytes}."""
    shards = {
        "model-00001-of-00003.safetensors": {"a.w": _values(rng, "float32", (4, 3))},
        "model-00002-of-00003.safetensors": {
            "b.w": _values(rng, BF16, (2, 5)),
            "b.b": _values(rng, "float16", (5,)),
        },
        "model-00003-of-00003.safetensors": {"c": _values(rng, "int32", (6,))},
    }
    files = {name: _saved(t, {"format": "pt"}) for name, t in shards.items()}
    weight_map = {k: shard for shard, t in shards.items() for k in t}
    index = {"metadata": {"total_size": 1}, "weight_map": weight_map}
    files[INDEX] = json.dumps(index, indent=2).encode()
    return files


def _file_trial(name: str, content, *, reference: bool = True, may_accept=False) -> Trial:
    return Trial(
        name,
        {"m.safetensors": content},
        JASK.format(rel="m.safetensors"),
        REFERENCE_LOAD + REFERENCE_FILE.format(rel="m.safetensors") if reference else None,
        jask_may_accept=may_accept,
    )


def _checkpoint_trial(name: str, files: dict, *, reference: bool = True, rel=".") -> Trial:
    return Trial(
        name,
        files,
        JASK.format(rel=rel),
        REFERENCE_LOAD + REFERENCE_CHECKPOINT if reference else None,
    )


# --- structured hostile cases ------------------------------------------------------------------

CONFUSIONS = [None, True, 0, 1, -1, 1.5, "F32", "", [], {}, [None], ["1"], [1.5], [True], [-1]]
CONFUSIONS += [[2**64], [[1]], {"0": 1}, [0, 4, 8], [4, 0], [0, 2**63], 2**64]


def _header_cases() -> list[Trial]:
    good = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    data = np.arange(2, dtype=np.float32).tobytes()
    trials = []
    for field in ("dtype", "shape", "data_offsets"):
        for value in CONFUSIONS:
            header = {"a": {**good, field: value}}
            trials.append(_file_trial(f"{field}={value!r}", _raw_file(header, data)))
        header = {"a": {k: v for k, v in good.items() if k != field}}
        trials.append(_file_trial(f"no {field}", _raw_file(header, data)))
    for value in [*CONFUSIONS, {"k": None}, {"k": {"x": "y"}}, {"k": 1}, {"k": "v"}]:
        header = {"__metadata__": value, "a": good}
        trials.append(_file_trial(f"__metadata__={value!r}", _raw_file(header, data)))
    for value in CONFUSIONS:
        trials.append(_file_trial(f"entry={value!r}", _raw_file({"a": value}, data)))
        trials.append(_file_trial(f"header={value!r}", _raw_file(json.dumps(value), data)))
    for dtype in [*LIBRARY_DTYPES, "f32", "F32 ", "", "\u0000", "F32\u0000", "BF16" * 1000]:
        itemsize = {"F64": 8, "I64": 8, "U64": 8, "C64": 8, "F32": 4, "I32": 4, "U32": 4}
        size = 2 * itemsize.get(dtype, 2 if dtype in ("F16", "BF16", "I16", "U16") else 1)
        header = {"a": {**good, "dtype": dtype, "data_offsets": [0, size]}}
        trials.append(_file_trial(f"dtype {dtype[:20]!r}", _raw_file(header, bytes(size))))
    for shape in ([], [0], [2, 0], [0, 2**62], [0, 2**63], [0, 2**64 - 1], [1] * 5000, [2**31] * 3):
        count = math.prod(shape)
        nbytes = 4 * count if count <= 16 else 8  # past 16 elements, a lie about the span
        header = {"a": {**good, "shape": shape, "data_offsets": [0, nbytes]}}
        trials.append(_file_trial(f"shape {str(shape)[:30]}", _raw_file(header, bytes(nbytes))))
    layouts = {
        "gap": ([0, 4], [8, 12], 12),
        "overlap": ([0, 8], [4, 12], 12),
        "same bytes": ([0, 8], [0, 8], 8),
        "trailing byte": ([0, 4], [4, 8], 9),
        "past the end": ([0, 4], [4, 8], 6),
        "reversed order": ([4, 8], [0, 4], 8),
    }
    for what, (a, b, size) in layouts.items():
        header = {
            "a": {"dtype": "F32", "shape": [(a[1] - a[0]) // 4], "data_offsets": a},
            "b": {"dtype": "F32", "shape": [(b[1] - b[0]) // 4], "data_offsets": b},
        }
        trials.append(_file_trial(what, _raw_file(header, bytes(range(size)))))
    for offsets in ([0, 0], [4, 4], [8, 8], [9, 9]):  # an empty tensor, beside "a"
        header = {"a": good, "e": {"dtype": "F32", "shape": [0], "data_offsets": offsets}}
        trials.append(_file_trial(f"empty tensor at {offsets}", _raw_file(header, data)))
    text = json.dumps({"a": good}).encode()
    for length in (0, 1, len(text) - 1, len(text) + 1, 100_000_001, 2**63, 2**64 - 1):
        trials.append(_file_trial(f"length {length}", _raw_file(text, data, length=length)))
    for content in (b"", b"\x00" * 7, b"\xff" * 8, (2).to_bytes(8, "little") + b"{}"):
        trials.append(_file_trial(f"file {content[:10]!r}", content))
    deep = b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": %s}}'
    for depth in (125, 126, 127, 1000, 100_000):
        nested = b"[" * depth + b"]" * depth
        trials.append(_file_trial(f"{depth} levels deep", _raw_file(deep % nested, data)))
    for number in (b"NaN", b"-Infinity", b"1e400", b"-0", b"9" * 30, b"9" * 5000, b"1.0"):
        trials.append(_file_trial(f"x={number[:10]!r}", _raw_file(deep % number, data)))
    for escape in (b'"\\ud800"', b'"\\udc00\\ud83d"', b'"\\ud83d\\ude00"', b'"\\u0000"'):
        trials.append(_file_trial(f"x={escape!r}", _raw_file(deep % escape, data)))
    trials.append(_file_trial("duplicate", _raw_file(b'{"a": 1, "a": 2}', data)))
    trials.append(_file_trial("not UTF-8", _raw_file(b'{"\xff": 1}', data)))
    trials.append(_file_trial("FIFO", FIFO, reference=False))
    trials.append(_file_trial("folder", DIR, reference=False))
    trials.append(_file_trial("/dev/zero", Symlink("/dev/zero"), reference=False))
    trials.append(_file_trial("dangling link", Symlink("gone"), reference=False))
    return trials


def _index_cases(rng: np.random.Generator) -> list[Trial]:
    base = _checkpoint(rng)
    shard = "model-00001-of-00003.safetensors"
    weight_map = json.loads(base[INDEX])["weight_map"]

    def with_index(index) -> dict:
        text = index if isinstance(index, bytes) else json.dumps(index).encode()
        return base | {INDEX: text}

    trials = [
        _checkpoint_trial("valid", base),
        _checkpoint_trial("valid, by index", base, rel=INDEX),
    ]
    for value in CONFUSIONS:
        trials.append(_checkpoint_trial(f"index={value!r}", with_index(value)))
        trials.append(_checkpoint_trial(f"weight_map={value!r}", with_index({"weight_map": value})))
        index = {"weight_map": weight_map | {"a.w": value}}
        trials.append(_checkpoint_trial(f"shard={value!r}", with_index(index)))
    names = ["..", ".", "", "../outside.safetensors", "/dev/zero", "/etc/hostname", f"./{shard}"]
    names += [f"sub/{shard}", f"{shard}\u0000", "missing.safetensors", shard.upper()]
    for name in names:
        files = with_index({"weight_map": weight_map | {"a.w": name}}) | {"sub": DIR}
        files |= {f"sub/{shard}": base[shard]}
        trials.append(_checkpoint_trial(f"shard named {name!r}", files, reference=False))
    specials = {
        "FIFO": FIFO,
        "folder": DIR,
        "/dev/zero": Symlink("/dev/zero"),
        "dangling link": Symlink("gone.safetensors"),
        "link to another shard": Symlink("model-00003-of-00003.safetensors"),
        "link to itself": Symlink(shard),
    }
    for what, special in specials.items():
        trials.append(
            _checkpoint_trial(f"shard is a {what}", base | {shard: special}, reference=False)
        )
        trials.append(
            _checkpoint_trial(f"index is a {what}", base | {INDEX: special}, reference=False)
        )
    linked = {k: v for k, v in base.items() if k != shard} | {"blobs/x": base[shard]}
    trials.append(
        _checkpoint_trial(
            "shard linked as in the hub's cache", linked | {shard: Symlink("blobs/x")}
        )
    )
    twice = base | {
        "model-00003-of-00003.safetensors": _saved(
            {"c": np.zeros(6, np.int32), "a.w": np.zeros((4, 3), np.float32)}
        )
    }
    trials.append(_checkpoint_trial("a tensor in two shards", twice))
    trials.append(
        _checkpoint_trial(
            "a tensor the shard lacks", with_index({"weight_map": weight_map | {"z": shard}})
        )
    )
    trials.append(
        _checkpoint_trial("a shard missing", {k: v for k, v in base.items() if k != shard})
    )
    trials.append(_checkpoint_trial("empty weight_map", with_index({"weight_map": {}})))
    trials.append(
        _checkpoint_trial("duplicate tensor", with_index(b'{"weight_map": {"c": "x", "c": "y"}}'))
    )
    trials.append(
        _checkpoint_trial(
            "deep index", with_index(b'{"weight_map": ' + b"[" * 10**5 + b"]" * 10**5 + b"}")
        )
    )
    trials.append(_checkpoint_trial("two indexes", base | {"b" + INDEX: base[INDEX]}))
    return trials


# --- seeded mutations --------------------------------------------------------------------------

NUMBERS = [b"0", b"1", b"-1", b"-0", b"3", b"4", b"8", b"2147483648", b"9223372036854775807"]
NUMBERS += [b"9223372036854775808", b"18446744073709551615", b"18446744073709551616", b"1e400"]
NUMBERS += [b"1.5", b"NaN", b"9" * 400, b"[]", b"{}", b'"x"', b"null", b"true"]
ALPHABET = b'0123456789[]{},:"-. eEaFIBUxnt\\\x00\xff'
# How often each kind of mutation is drawn: data bytes keep the file valid (values compared).
MUTATIONS = {"char": 3, "number": 3, "dtype": 1, "length": 1, "cut": 1, "grow": 1, "data": 3}
MUTATIONS |= {"insert": 1, "delete": 1}


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three seeded mutations of a safetensors file, most of them in its header."""
    data = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 3])):
        n = int.from_bytes(data[:8], "little") if len(data) >= 8 else 0
        header_end = min(8 + n, len(data))
        kind = rng.choices(list(MUTATIONS), weights=list(MUTATIONS.values()))[0]
        if kind == "char" and header_end > 8:
            data[rng.randrange(8, header_end)] = rng.choice(ALPHABET)
        elif kind == "number" and header_end > 8:
            header = bytes(data[8:header_end])
            spans = [(m.start(), m.end()) for m in _NUMBER.finditer(header)]
            if spans:
                start, end = rng.choice(spans)
                new = rng.choice(
                    NUMBERS + [str(int(header[start:end]) + rng.randint(-9, 9)).encode()]
                )
                header = header[:start] + new + header[end:]
                if rng.random() < 0.5:  # the length field follows the header, or not
                    data[:8] = len(header).to_bytes(8, "little")
                data[8:header_end] = header
        elif kind == "dtype" and header_end > 8:
            header = bytes(data[8:header_end])
            spans = [(m.start(1), m.end(1)) for m in _DTYPE.finditer(header)]
            if spans:
                start, end = rng.choice(spans)
                new = rng.choice(LIBRARY_DTYPES + ["f32", "F3", "BF16x", ""]).encode()
                header = header[:start] + new + header[end:]
                data[:8] = len(header).to_bytes(8, "little")
                data[8:header_end] = header
        elif kind == "length" and len(data) >= 8:
            length = rng.choice(
                [
                    0,
                    1,
                    n - 1,
                    n + 1,
                    n + rng.randint(-40, 40),
                    len(data) - 8,
                    len(data) - 7,
                    100_000_001,
                    2**63,
                    2**64 - 1,
                    rng.getrandbits(64),
                ]
            )
            data[:8] = max(0, min(length, 2**64 - 1)).to_bytes(8, "little")
        elif kind == "cut":
            del data[rng.randrange(len(data) + 1) :]
        elif kind == "grow":
            data += bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 3, 4, 8, 100])))
        elif kind == "data" and header_end < len(data):
            data[rng.randrange(header_end, len(data))] = rng.getrandbits(8)
        elif kind == "insert" and header_end > 8:
            data.insert(rng.randrange(8, header_end), rng.choice(ALPHABET))
        elif kind == "delete" and header_end > 8:
            del data[rng.randrange(8, header_end)]
    return bytes(data)


_NUMBER = re.compile(rb"-?\d+")
_DTYPE = re.compile(rb'"dtype":\s*"([^"]*)"')


def _mutation_trials(count: int, seed: int) -> list[Trial]:
    rng_np = np.random.default_rng(seed)
    files = _base_files(rng_np)
    checkpoint = _checkpoint(rng_np)
    trials = []
    for i in range(count):
        rng = random.Random(f"{seed}-{i}")
        if i % 4 == 3:  # a checkpoint: its index or one shard mutated
            target = rng.choice(sorted(checkpoint))
            content = checkpoint[target]
            if target == INDEX:
                content = bytearray(content)
                for _ in range(rng.randint(1, 3)):
                    content[rng.randrange(len(content))] = rng.choice(ALPHABET)
                content = bytes(content)
            else:
                content = _mutate(content, rng)
            trials.append(
                _checkpoint_trial(f"mutation {i} of {target}", checkpoint | {target: content})
            )
        else:
            # Mostly files of Jask's dtypes, whose values are compared.
            base = rng.randrange(4) if rng.random() < 0.75 else rng.randrange(len(files))
            trials.append(_file_trial(f"mutation {i} of file {base}", _mutate(files[base], rng)))
    return trials


# --- .npy: the cases of issue 32 that reach DiskArray.open -------------------------------------


def _npy(dict_text: str, data: bytes = b"") -> bytes:
    """A version 1.0 .npy file whose header dict is `dict_text` (padded as NumPy pads it)."""
    text = dict_text.encode()
    length = -(-(10 + len(text) + 1) // 64) * 64 - 10
    return (
        b"\x93NUMPY\x01\x00" + length.to_bytes(2, "little") + text.ljust(length - 1) + b"\n" + data
    )


def test_a_npy_header_numpys_tokenizer_fails_on_is_a_value_error_naming_the_file(tmp_path):
    """numpy.load raises tokenize.TokenError here; Jask parses .npy headers in C++ (never with
    numpy.lib.format) and refuses the file with a ValueError."""
    path = tmp_path / "x.npy"
    path.write_bytes(_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,", bytes(12)))
    with pytest.raises(Exception) as numpy_error:
        np.load(path)
    assert type(numpy_error.value).__name__ == "TokenError"
    with pytest.raises(ValueError, match=f"{path}: malformed .npy header"):
        jask.DiskArray.open(path)


def test_npy_and_raw_shapes_of_more_than_64_dimensions_are_refused_at_open(tmp_path):
    path = tmp_path / "x.npy"
    shape = "(" + "1, " * 65 + ")"
    path.write_bytes(
        _npy(f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}", bytes(4))
    )
    with pytest.raises(ValueError, match="maximum supported dimension"):
        np.load(path)
    with pytest.raises(ValueError, match=f"{path}: the .npy shape has 65 dimensions"):
        jask.DiskArray.open(path)
    with pytest.raises(ValueError, match="shape has 65 dimensions; NumPy and JAX arrays"):
        jask.DiskArray.open(path, shape=(1,) * 65, dtype="float32")


def test_a_path_holding_nul_is_refused_not_cut_short_to_another_file(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="holds a NUL character"):
        jask.DiskArray.open(f"{path}\0.bak")
    with pytest.raises(ValueError, match="holds a NUL character"):
        jask.open_safetensors(f"{path}\0.safetensors")


# --- the tests ---------------------------------------------------------------------------------

PRELOAD = ("safetensors", "safetensors.numpy", "ml_dtypes", "json")


def test_valid_files_of_every_dtype_open_with_the_librarys_values(tmp_path):
    rng = np.random.default_rng(0)
    trials = [_file_trial(f"base {i}", f) for i, f in enumerate(_base_files(rng))]
    trials.append(_checkpoint_trial("checkpoint", _checkpoint(rng)))
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    # The mixed files, a file for each other stored dtype, uint8 mixed in, the checkpoint.
    values = 4 + len(STORED_ALONE) + 1 + 1
    assert counts == {"values": values, "refused: TypeError": len(NOT_STORED)}, counts


def test_structured_hostile_headers_and_indexes(tmp_path):
    trials = fuzz_sample(_header_cases() + _index_cases(np.random.default_rng(1)), 110, 0)
    counts = check_trials(trials, tmp_path, preload=PRELOAD)
    print(f"structured trials: {dict(counts)}")
    assert counts["values"] > 0 and counts["refused: ValueError"] > 0


def test_seeded_mutations_of_library_files_and_checkpoints(tmp_path):
    counts = check_trials(_mutation_trials(fuzz_trials(90), seed=0), tmp_path, preload=PRELOAD)
    print(f"mutation trials: {dict(counts)}")
    assert counts["values"] > 0 and counts["refused: ValueError"] > 0


# Jask's .npy open against numpy.load, on the same harness (x64 on: float64 files stay float64).
JASK_NPY = """
jax.config.update("jax_enable_x64", True)
out = jask.DiskArray.open(os.path.join(P, "x.npy"))
"""
REFERENCE_NPY = """
out = np.load(os.path.join(P, "x.npy"), allow_pickle=False)
"""


def _npy_mutation_trials(count: int, seed: int) -> list[Trial]:
    rng_np = np.random.default_rng(seed)
    bases = []
    for dtype, shape in [("float32", (3, 4)), ("float64", (5,)), ("int32", ()), ("bool", (2, 0))]:
        buffer = io.BytesIO()
        np.save(buffer, _values(rng_np, dtype, shape))
        bases.append(buffer.getvalue())
    trials = []
    for i in range(count):
        rng = random.Random(f"npy-{seed}-{i}")
        data = bytearray(rng.choice(bases))
        header_end = 10 + int.from_bytes(data[8:10], "little")
        for _ in range(rng.choice([1, 1, 2])):
            where = rng.random()
            if where < 0.5:  # the header dict
                at = rng.randrange(8, min(header_end, len(data)))
            elif where < 0.9 and header_end < len(data):  # the values
                at = rng.randrange(header_end, len(data))
            else:
                at = rng.randrange(len(data))
            data[at] = rng.choice(ALPHABET + b"()'<>fiLTFu")
        if rng.random() < 0.1:
            del data[rng.randrange(len(data)) :]
        trials.append(Trial(f"npy mutation {i}", {"x.npy": bytes(data)}, JASK_NPY, REFERENCE_NPY))
    return trials


def test_seeded_mutations_of_npy_files_against_numpy_load(tmp_path):
    counts = check_trials(_npy_mutation_trials(fuzz_trials(30), seed=0), tmp_path)
    print(f"npy mutation trials: {dict(counts)}")
    assert counts["values"] > 0 and counts["refused: ValueError"] > 0
