"""safetensors files and sharded checkpoints: opened in place, written by streaming.

A safetensors file (https://github.com/huggingface/safetensors) is an 8-byte
little-endian header length N, N bytes of JSON (an object: each tensor's
dtype, shape and data_offsets [begin, end) within the data area, and an
optional "__metadata__" object of strings), then the data area: every
tensor's bytes in C order, little-endian. A sharded checkpoint is a folder of
such files and an index, `model.safetensors.index.json`:
{"metadata": {"total_size": N}, "weight_map": {tensor name: shard file name}}.

Each tensor opens as a raw DiskArray at its offset in the file (no copy), so
any op, `jax.grad` and `optax` run on it within the memory budget.
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import re
import reprlib
import secrets
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _engine, _runtime
from .._api.io import MAX_NDIM, open_array
from .._durable import fsync_folder
from .._files import open_regular, read_regular
from .._jax import compat
from .._jax.diskarray import DiskArray

# safetensors' own reader refuses longer headers (MAX_HEADER_SIZE).
MAX_HEADER_BYTES = 100_000_000
# save_safetensors starts the data area at this boundary, so direct I/O of a
# tensor's aligned middle needs no shifted buffer for the first one.
DATA_ALIGNMENT = 4096
# The longest index Jask reads: a weight_map of a million tensors fits many times over.
MAX_INDEX_BYTES = 100_000_000
INDEX_SUFFIX = ".safetensors.index.json"
INDEX_NAME = "model" + INDEX_SUFFIX
_MAX_FILE_BYTES = 2**63 - 1

# safetensors dtype names of the dtypes Jask stores.
_DTYPES = {
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(jnp.bfloat16),
    "F64": np.dtype(np.float64),
    "I32": np.dtype(np.int32),
    "BOOL": np.dtype(np.bool_),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "I16": np.dtype(np.int16),
    "U16": np.dtype(np.uint16),
    "I64": np.dtype(np.int64),
    "U32": np.dtype(np.uint32),
    "U64": np.dtype(np.uint64),
    "C64": np.dtype(np.complex64),
    "F8_E4M3": np.dtype(jnp.float8_e4m3fn),  # safetensors' F8_E4M3 is the fn variant
    "F8_E5M2": np.dtype(jnp.float8_e5m2),
    "F8_E4M3FNUZ": np.dtype(jnp.float8_e4m3fnuz),
    "F8_E5M2FNUZ": np.dtype(jnp.float8_e5m2fnuz),
}
_NAME_OF = {dt: name for name, dt in _DTYPES.items()}
_STORED = ", ".join(f"{name} ({dt})" for name, dt in _DTYPES.items())
_SHARD_NAME = re.compile(r"model-(\d{5})-of-(\d{5})\.safetensors")


@dataclass(frozen=True)
class _Tensor:
    """One tensor of a header: where its bytes lie in the data area."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class _Header:
    path: str
    data_start: int  # file offset of the data area: 8 + N
    tensors: list[_Tensor]  # in the order of their bytes in the file
    metadata: dict[str, str]


# -- reading ------------------------------------------------------------------


def open_safetensors(path, *, mode: str = "r") -> dict[str, DiskArray]:
    """Opens every tensor of a safetensors file or sharded checkpoint in place.

    Args:
      path: a `.safetensors` file; a sharded checkpoint's index
        (`*.safetensors.index.json`); or a folder holding exactly one such
        index (or, without one, exactly one `.safetensors` file).
      mode: "r" (read-only: `update_` raises) or "r+" (`update_` of a tensor
        rewrites its bytes; every other tensor's bytes and the header stay
        as they are).

    Returns:
      A dict from tensor name to DiskArray: per file in the order of the
      tensors' bytes, shards in the order of their names. The file's
      `__metadata__` is `jask.safetensors_metadata(path)`.

    Raises:
      ValueError: the header or index is not a valid safetensors one, or is
        one the safetensors library refuses (each message names the file and
        the tensor or index entry): JSON it does not read (NaN, integers past
        64 bits, nesting past 127 levels), sizes past the file, tensors that
        do not lie back to back filling the data area, an index over 100 MB
        or naming a shard outside its folder.
      TypeError: a tensor's dtype is not one Jask stores (F32, F16, BF16, F64,
        I8, I16, I32, I64, U8, U16, U32, U64, BOOL, C64, F8_E4M3, F8_E5M2,
        F8_E4M3FNUZ, F8_E5M2FNUZ); a 64-bit one (F64, I64, U64) opened with
        mode="r+" while jax_enable_x64 is off.
      OSError: the file or index is missing or unreadable, or a file, index
        or shard is not a regular file (a FIFO or a device is refused before
        it is read; a missing shard is a ValueError naming the index).

    >>> import numpy as np, jask, tempfile, os, safetensors.numpy
    >>> p = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> safetensors.numpy.save_file({"w": np.arange(3, dtype=np.float32)}, p)
    >>> np.asarray(jask.open_safetensors(p)["w"]).tolist()
    [0.0, 1.0, 2.0]
    """
    if mode not in ("r", "r+"):
        raise ValueError(f"open_safetensors: mode must be 'r' or 'r+', got {mode!r}")
    arrays = {}
    for header in _headers(os.fsdecode(os.fspath(path))):
        for t in header.tensors:
            arrays[t.name] = open_array(
                header.path,
                shape=t.shape,
                dtype=t.dtype,
                offset=header.data_start + t.begin,
                mode=mode,
            )
    return arrays


def safetensors_metadata(path) -> dict[str, str]:
    """The `__metadata__` of a safetensors file ({} without one); of a sharded checkpoint, its first shard's.

    >>> import numpy as np, jask, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> jask.save_safetensors(p, {"w": np.zeros(2, np.float32)}, metadata={"format": "pt"})
    >>> jask.safetensors_metadata(p)
    {'format': 'pt'}
    """
    headers = _headers(os.fsdecode(os.fspath(path)))
    return dict(headers[0].metadata) if headers else {}


def _headers(path: str) -> list[_Header]:
    """The checked headers of the file, or of every shard of the checkpoint, at `path`."""
    if "\0" in path:
        raise ValueError(f"open_safetensors: the path {path!r} holds a NUL character")
    if os.path.isdir(path):
        path = _file_in_folder(path)
    if path.endswith(INDEX_SUFFIX):
        return _index_headers(path)
    return [_read_header(path)]


def _file_in_folder(folder: str) -> str:
    names = sorted(os.listdir(folder))
    indexes = [n for n in names if n.endswith(INDEX_SUFFIX)]
    if len(indexes) > 1:
        raise ValueError(
            f"{folder}: holds {len(indexes)} safetensors indexes ({', '.join(indexes)}); "
            "pass the path of the one to open"
        )
    if indexes:
        return os.path.join(folder, indexes[0])
    files = [n for n in names if n.endswith(".safetensors")]
    if len(files) != 1:
        raise ValueError(
            f"{folder}: holds no *{INDEX_SUFFIX} and {len(files)} .safetensors files; "
            "open_safetensors needs an index or exactly one file"
        )
    return os.path.join(folder, files[0])


def _index_headers(index_path: str) -> list[_Header]:
    """Every shard's header, each checked against the index's weight_map."""
    weight_map = _read_weight_map(index_path)
    folder = os.path.dirname(index_path)
    by_shard: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        by_shard.setdefault(shard, []).append(name)
    headers = []
    for shard in sorted(by_shard):
        names = by_shard[shard]
        shard_path = os.path.join(folder, shard)
        try:
            header = _read_header(
                shard_path, f"safetensors shard (of tensor {_brief(names[0])}, by {index_path})"
            )
        except FileNotFoundError:
            raise ValueError(
                f"{index_path}: the weight_map puts tensor {_brief(names[0])} in {_brief(shard)}, "
                f"but {shard_path} does not exist"
            ) from None
        held = {t.name for t in header.tensors}
        for name in names:
            if name not in held:
                raise ValueError(
                    f"{index_path}: the weight_map puts tensor {_brief(name)} in {shard_path}, "
                    "which does not hold it"
                )
        mapped = set(names)
        for t in header.tensors:
            if t.name not in mapped:
                raise ValueError(
                    f"{shard_path}: holds tensor {_brief(t.name)}, which the weight_map of "
                    f"{index_path} does not put there"
                )
        headers.append(header)
    return headers


def _read_weight_map(index_path: str) -> dict[str, str]:
    data = read_regular(index_path, "safetensors index", MAX_INDEX_BYTES)
    index = _parse_json(data, index_path, "the safetensors index")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index_path}: not a safetensors index (no 'weight_map' object)")
    for name, shard in weight_map.items():
        # A shard is a file beside the index, never a path out of its folder.
        if (
            not isinstance(shard, str)
            or shard != os.path.basename(shard)
            or shard in ("", ".", "..")
            or "\0" in shard
        ):
            raise ValueError(
                f"{index_path}: tensor {_brief(name)} maps to {_brief(shard)}, which is not the "
                "name of a file beside the index"
            )
    return weight_map


def _read_header(path: str, what: str = "safetensors file") -> _Header:
    """The header of the safetensors file at `path`, every claim in it checked against the file.

    `what` starts the message of an error opening the file (the shard of which index).
    """
    fd = open_regular(path, what)
    try:
        size = os.fstat(fd).st_size
        if size < 8:
            raise ValueError(
                f"{path}: not a safetensors file: {size} bytes, fewer than its 8-byte header length"
            )
        n = int.from_bytes(_read_exactly(fd, 8, 0, path), "little")
        if n > MAX_HEADER_BYTES:
            raise ValueError(
                f"{path}: header length {n} is over safetensors' limit of {MAX_HEADER_BYTES} bytes"
            )
        if n > size - 8:
            raise ValueError(
                f"{path}: header length {n} is more than the {size - 8} bytes after it "
                "(truncated, or not a safetensors file)"
            )
        raw = _read_exactly(fd, n, 8, path)
    finally:
        os.close(fd)
    if not raw.startswith(b"{"):
        raise ValueError(f"{path}: the safetensors header does not start with '{{'")
    entries = _parse_json(raw, path, "the safetensors header")
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: the safetensors header is not a JSON object")
    metadata = entries.pop("__metadata__", None)
    metadata = {} if metadata is None else _checked_metadata(metadata, f"{path}: __metadata__")
    data_bytes = size - 8 - n
    tensors = [_checked_tensor(path, name, info, data_bytes) for name, info in entries.items()]
    tensors.sort(key=operator.attrgetter("begin", "end"))
    _check_layout(path, tensors, data_bytes)
    return _Header(path, 8 + n, tensors, metadata)


def _read_exactly(fd: int, n: int, offset: int, path: str) -> bytes:
    chunks, done = [], 0
    while done < n:
        chunk = os.pread(fd, min(n - done, 1 << 24), offset + done)
        if not chunk:
            raise ValueError(
                f"{path}: the file ended after {offset + done} bytes while it was read"
            )
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


# -- JSON as safetensors' own parser (serde_json) reads it --------------------------------------

# serde_json refuses JSON nested deeper than this (objects and arrays, the header's own included).
_MAX_JSON_DEPTH = 127
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _JsonRefusal(ValueError):
    """A JSON text Python's parser reads but safetensors' refuses (the reason, no path)."""


def _parse_json(data: bytes, path: str, what: str):
    """The JSON value in `data`; ValueError naming `path` for anything safetensors would refuse.

    Python's json module reads a superset of what serde_json (the safetensors library's parser)
    reads: NaN and Infinity, integers past 64 bits, lone surrogates, duplicate keys, any depth.
    Each is refused here, so a file Jask opens is one the library opens.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: {what} is not UTF-8 ({e})") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
        if _SURROGATE_ESCAPE.search(text):
            # A pair of escapes reads as one character; a lone half cannot be encoded.
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except _JsonRefusal as e:
        raise ValueError(f"{path}: {what} {e}") from None
    except UnicodeEncodeError:
        raise ValueError(f"{path}: {what} holds a lone UTF-16 surrogate escape") from None
    except RecursionError:
        raise ValueError(
            f"{path}: {what} nests arrays or objects deeper than the {_MAX_JSON_DEPTH} levels "
            "safetensors reads"
        ) from None
    except MemoryError:
        raise ValueError(
            f"{path}: {what} ({len(data)} bytes) needs more memory to parse than this process "
            "may use"
        ) from None
    except ValueError as e:  # json.JSONDecodeError
        raise ValueError(f"{path}: {what} is not valid JSON ({e})") from None
    return value


def _unique_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _JsonRefusal(f"names {_brief(key)} twice")
        out[key] = value
    return out


class _WideInt(float):
    """An integer past 64 bits, which serde_json reads as a float: refused wherever an int is
    needed, as a number out of range (its repr is the integer as written)."""

    def __new__(cls, text: str):
        value = super().__new__(cls, _json_float(text))
        value.text = text
        return value

    def __repr__(self) -> str:
        return (
            self.text if len(self.text) <= 40 else f"{self.text[:20]}...({len(self.text)} digits)"
        )


def _json_int(text: str):
    # serde_json reads -0 as a float, and an integer outside i64/u64 too.
    if text == "-0":
        return -0.0
    if len(text) <= 20:
        value = int(text)
        if -(2**63) <= value < 2**64:
            return value
    return _WideInt(text)


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
        raise _JsonRefusal(f"holds the number {shown}, out of the range of a float64")
    return value


def _json_constant(text: str):
    raise _JsonRefusal(f"holds {text}, which is not JSON")


def _too_deep(value, depth: int) -> bool:
    """Whether `value`, at nesting level `depth` (the outermost level is 1), holds arrays or
    objects deeper than _MAX_JSON_DEPTH."""
    stack = [(value, depth)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        if depth > _MAX_JSON_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in items if isinstance(child, (dict, list)))
    return False


class _Where:
    """ "<path>: tensor <name>", formatted only when a message is (most headers raise none)."""

    __slots__ = ("path", "name")

    def __init__(self, path: str, name: str):
        self.path, self.name = path, name

    def __str__(self) -> str:
        return f"{self.path}: tensor {_brief(self.name)}"


def _brief(value) -> str:
    """`repr(value)` cut to about 120 characters and three levels: a header's values in messages."""
    return _REPR.repr(value)


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlist = _REPR.maxdict = 8
_REPR.maxlevel = 3


_FIELDS = frozenset(("dtype", "shape", "data_offsets"))


def _checked_tensor(path: str, name: str, info, data_bytes: int) -> _Tensor:
    where = _Where(path, name)
    if not isinstance(info, dict) or not _FIELDS <= info.keys():
        raise ValueError(f"{where}: its entry must be an object with dtype, shape and data_offsets")
    # Fields of other names are ignored, as the library ignores them, but read as it reads them:
    # the rest of the header is typed, too shallow to nest too deep.
    if len(info) > len(_FIELDS) and any(_too_deep(info[k], 3) for k in info.keys() - _FIELDS):
        raise ValueError(
            f"{where}: its entry nests arrays or objects deeper than the {_MAX_JSON_DEPTH} levels "
            "safetensors reads"
        )
    dtype_name, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype_name, str):
        raise ValueError(f"{where}: dtype must be a string, got {_brief(dtype_name)}")
    if dtype_name not in _DTYPES:
        raise TypeError(
            f"{where} has dtype {_brief(dtype_name)[1:-1]}, which Jask does not store; it stores "
            f"{_STORED}"
        )
    if not isinstance(shape, list) or not all(_is_written_int(d) and d >= 0 for d in shape):
        raise ValueError(f"{where}: shape must be a list of non-negative ints, got {_brief(shape)}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_written_int, offsets))):
        raise ValueError(
            f"{where}: data_offsets must be two ints [begin, end], got {_brief(offsets)}"
        )
    if len(shape) > MAX_NDIM:
        raise ValueError(
            f"{where}: shape has {len(shape)} dimensions; NumPy and JAX arrays have at most "
            f"{MAX_NDIM}"
        )
    begin, end = offsets
    if not 0 <= begin <= end <= _MAX_FILE_BYTES:
        raise ValueError(
            f"{where}: data_offsets {_brief(offsets)} must satisfy 0 <= begin <= end < 2**63"
        )
    dtype = _DTYPES[dtype_name]
    nbytes = _checked_nbytes(where, shape, dtype_name, dtype.itemsize)
    if end - begin != nbytes:
        raise ValueError(
            f"{where}: shape {tuple(shape)} of {dtype_name} is {nbytes} bytes, but data_offsets "
            f"{offsets} span {end - begin}"
        )
    if end > data_bytes:
        raise ValueError(
            f"{where}: its bytes [{begin}, {end}) do not fit in the data area of {data_bytes} "
            "bytes (the file is truncated, or the offsets are wrong)"
        )
    return _Tensor(name, dtype, tuple(shape), begin, end)


def _checked_nbytes(where: str, shape: list[int], dtype_name: str, itemsize: int) -> int:
    """The bytes of `shape`; ValueError past a file offset, counting zero dimensions as one as
    Jask's engine does (every product stays under 2**63: no huge-integer arithmetic)."""
    bound = itemsize
    for d in shape:
        bound *= max(d, 1)
        if bound > _MAX_FILE_BYTES:
            raise ValueError(
                f"{where}: shape {_brief(shape)} of {dtype_name} is more than the "
                f"{_MAX_FILE_BYTES} bytes (2**63 - 1) a file offset can address"
            )
    return 0 if 0 in shape else bound


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_written_int(value) -> bool:
    """An int in the JSON text, in range or not (a range check follows)."""
    return _is_index(value) or isinstance(value, _WideInt)


def _check_layout(path: str, tensors: list[_Tensor], data_bytes: int) -> None:
    """The tensors (sorted by offsets) lie back to back from 0 and fill the data area, as the
    safetensors library requires: no gap, no shared byte, nothing after the last tensor."""
    at, last = 0, None
    for t in tensors:
        if t.begin < at:
            raise ValueError(
                f"{path}: tensors {_brief(last.name)} (bytes [{last.begin}, {last.end})) and "
                f"{_brief(t.name)} (bytes [{t.begin}, {t.end})) overlap"
            )
        if t.begin > at:
            raise ValueError(
                f"{path}: tensor {_brief(t.name)} starts at byte {t.begin} of the data area, but "
                f"the tensors before it end at {at}; safetensors allows no gap between tensors"
            )
        at, last = t.end, t
    if at != data_bytes:
        raise ValueError(
            f"{path}: the tensors end at byte {at} of the data area, which holds {data_bytes}; "
            "safetensors allows no bytes after the last tensor"
        )


def _checked_metadata(metadata, what: str) -> dict[str, str]:
    ok = isinstance(metadata, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    )
    if not ok:
        raise ValueError(f"{what} must map strings to strings, got {_brief(metadata)}")
    return metadata


# -- writing ------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    name: str
    value: object  # a DiskArray or a NumPy array
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return self.dtype.itemsize * math.prod(self.shape)


def save_safetensors(path, tree, *, max_shard_size=None, metadata=None) -> None:
    """Writes the arrays of `tree` as a safetensors file, or as a sharded checkpoint.

    Tensor names join the keys of each leaf's path with ".": dict keys,
    sequence indices and attribute names (`{"layers": [{"w": x}]}` gives
    "layers.0.w"), as `jax.tree_util.tree_flatten_with_path` lists them.
    DiskArray leaves are streamed into the file by the engine, a block at a
    time; in-memory leaves (jax or NumPy arrays) are written from memory.
    Tensors lie back to back, larger itemsizes first (each tensor aligned to
    its itemsize, as safetensors writes them); the header is padded with
    spaces so the data area starts at a 4096-byte boundary.

    Each file is written under a temporary name beside it, flushed and
    renamed into place (a crash leaves the old file or the new one); a
    sharded checkpoint's index is renamed last, and shards of an earlier
    save that the new index does not name are then removed. An existing file
    that is not a safetensors file (or index) is never overwritten.

    Args:
      path: the file to write; with `max_shard_size`, the folder for
        `model-00001-of-0000N.safetensors` files and `model.safetensors.index.json`.
      tree: a dict of name to array, or any pytree of arrays (DiskArrays,
        jax or NumPy arrays) of a dtype safetensors names (see open_safetensors).
      max_shard_size: bytes of tensor data per shard, an int or a string such
        as "5GB" (10**9 bytes) or "500MiB" (2**20); a tensor larger than it
        gets a shard of its own.
      metadata: `__metadata__` for every file, strings to strings (Hugging
        Face transformers expects {"format": "pt"} or "flax"/"np").

    >>> import numpy as np, jask, tempfile, os, safetensors.numpy
    >>> p = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> jask.save_safetensors(p, {"layer": [{"w": np.ones(2, np.float32)}]})
    >>> safetensors.numpy.load_file(p)["layer.0.w"].tolist()
    [1.0, 1.0]
    """
    path = os.fspath(path)
    metadata = {} if metadata is None else dict(_checked_save_metadata(metadata))
    leaves = _named_leaves(tree)
    if max_shard_size is None:
        if os.path.isdir(path):
            raise IsADirectoryError(
                f"save_safetensors: {path} is a folder; pass max_shard_size to write a sharded "
                "checkpoint into it, or a file path"
            )
        _refuse_foreign(path, _is_safetensors_file)
        _commit([_write_temp(path, leaves, metadata)])
        fsync_folder(os.path.dirname(path) or ".")
        return
    shards = _split(leaves, parse_size(max_shard_size))
    _save_sharded(path, shards, metadata)


def parse_size(size) -> int:
    """Bytes in `size`: an int, or a string as Hugging Face writes them ("5GB", "500MiB", "100KB").

    >>> parse_size("5GB"), parse_size("2KiB"), parse_size(100)
    (5000000000, 2048, 100)
    """
    if _is_index(size) and size > 0:
        return size
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    units |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
    match = (
        re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([A-Za-z]*)\s*", size)
        if isinstance(size, str)
        else None
    )
    if match and match.group(2).upper() in units:
        nbytes = int(float(match.group(1)) * units[match.group(2).upper()])
        if nbytes > 0:
            return nbytes
    raise ValueError(
        f"max_shard_size must be a positive int of bytes or a size such as '5GB' or '500MiB', "
        f"got {size!r}"
    )


def _checked_save_metadata(metadata) -> dict[str, str]:
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise TypeError(f"save_safetensors: metadata must map strings to strings, got {metadata!r}")
    return metadata


def _named_leaves(tree) -> list[_Leaf]:
    keyed, _ = jax.tree_util.tree_flatten_with_path(tree)
    leaves, seen = [], set()
    for key_path, value in keyed:
        name = ".".join(_key_name(k) for k in key_path)
        if not name:
            raise ValueError(
                "save_safetensors: a leaf has no name (a bare array); pass a dict of name to array"
            )
        if name == "__metadata__":
            raise ValueError(
                "save_safetensors: '__metadata__' is not a tensor name safetensors allows"
            )
        if name in seen:
            raise ValueError(f"save_safetensors: two leaves are both named {name!r}")
        seen.add(name)
        leaves.append(_leaf(name, value))
    return leaves


def _key_name(key) -> str:
    if isinstance(key, jax.tree_util.DictKey):
        return str(key.key)
    if isinstance(key, jax.tree_util.SequenceKey):
        return str(key.idx)
    if isinstance(key, jax.tree_util.GetAttrKey):
        return key.name
    if isinstance(key, jax.tree_util.FlattenedIndexKey):
        return str(key.key)
    return str(key)


def _leaf(name: str, value) -> _Leaf:
    if compat.is_tracer(value) or compat.is_tracer(getattr(value, "_handle", None)):
        raise TypeError(
            f"save_safetensors: leaf {name!r} is a traced value; it writes files and cannot run "
            "inside jax.jit or jax.grad"
        )
    if not isinstance(value, DiskArray):
        value = np.asarray(value)
    dtype = np.dtype(value.dtype)
    if dtype not in _NAME_OF:
        raise TypeError(
            f"save_safetensors: leaf {name!r} of shape {tuple(value.shape)} has dtype {dtype}, "
            f"which Jask does not store; it stores {_STORED}"
        )
    return _Leaf(name, value, dtype, tuple(value.shape))


def _split(leaves: list[_Leaf], limit: int) -> list[list[_Leaf]]:
    """Consecutive leaves into shards of at most `limit` bytes (a larger leaf alone), as HF does."""
    shards: list[list[_Leaf]] = []
    size = 0
    for leaf in leaves:
        if not shards or (size + leaf.nbytes > limit and shards[-1]):
            shards.append([])
            size = 0
        shards[-1].append(leaf)
        size += leaf.nbytes
    return shards or [[]]


def _save_sharded(folder: str, shards: list[list[_Leaf]], metadata: dict[str, str]) -> None:
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise FileExistsError(
            f"save_safetensors: {folder} exists and is not a folder; a sharded checkpoint "
            "(max_shard_size) is written into a folder"
        )
    os.makedirs(folder, exist_ok=True)
    index_path = os.path.join(folder, INDEX_NAME)
    _refuse_foreign(index_path, _is_index_file)
    old_shards = set(_read_weight_map(index_path).values()) if os.path.exists(index_path) else set()
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for name in names:
        _refuse_foreign(os.path.join(folder, name), _is_safetensors_file)
    staged = []
    try:
        for name, shard in zip(names, shards):
            staged.append(_write_temp(os.path.join(folder, name), shard, metadata))
        index = {
            "metadata": {"total_size": sum(leaf.nbytes for shard in shards for leaf in shard)},
            "weight_map": {leaf.name: n for n, shard in zip(names, shards) for leaf in shard},
        }
        staged.append(_write_temp_bytes(index_path, json.dumps(index, indent=2, sort_keys=True)))
    except BaseException:
        for temp, _ in staged:
            os.unlink(temp)
        raise
    _commit(staged)  # the index last: until it lands, the old index names the old shards
    fsync_folder(folder)
    for stale in sorted(old_shards - set(names)):
        if _SHARD_NAME.fullmatch(stale) and _is_safetensors_file(os.path.join(folder, stale)):
            os.unlink(os.path.join(folder, stale))


def _write_temp(path: str, leaves: list[_Leaf], metadata: dict[str, str]) -> tuple[str, str]:
    """A flushed safetensors file of `leaves` beside `path`: (its temporary name, `path`)."""
    leaves = sorted(leaves, key=lambda leaf: -leaf.dtype.itemsize)  # stable: tree order within
    header: dict = {"__metadata__": metadata} if metadata else {}
    offsets, offset = [], 0
    for leaf in leaves:
        header[leaf.name] = {
            "dtype": _NAME_OF[leaf.dtype],
            "shape": list(leaf.shape),
            "data_offsets": [offset, offset + leaf.nbytes],
        }
        offsets.append(offset)
        offset += leaf.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    data_start = -(-(8 + len(text)) // DATA_ALIGNMENT) * DATA_ALIGNMENT
    text += b" " * (data_start - 8 - len(text))
    temp = _temp_name(path)
    try:
        with open(temp, "xb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            for leaf, at in zip(leaves, offsets):
                if not isinstance(leaf.value, DiskArray) and leaf.nbytes:
                    f.seek(data_start + at)
                    f.write(np.ascontiguousarray(leaf.value).reshape(-1).view(np.uint8).data)
            f.truncate(data_start + offset)
            f.flush()
            os.fsync(f.fileno())
        disk_leaves = [
            (leaf, at) for leaf, at in zip(leaves, offsets) if isinstance(leaf.value, DiskArray)
        ]
        if disk_leaves:
            _runtime.ensure_scratch()
        for leaf, at in disk_leaves:
            _engine.save_into(leaf.value.handle, temp, data_start + at)  # flushes the file
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    return temp, path


def _write_temp_bytes(path: str, text: str) -> tuple[str, str]:
    temp = _temp_name(path)
    with open(temp, "x", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return temp, path


def _temp_name(path: str) -> str:
    return f"{path}.jask-save-{os.getpid()}-{secrets.token_hex(4)}"


def _commit(staged: list[tuple[str, str]]) -> None:
    for temp, path in staged:
        os.replace(temp, path)


def _refuse_foreign(path: str, is_ours) -> None:
    """FileExistsError if `path` holds something save_safetensors would not have written."""
    if os.path.lexists(path) and (not os.path.isfile(path) or not is_ours(path)):
        raise FileExistsError(
            f"save_safetensors: {path} exists and is not a safetensors file; it is not "
            "overwritten (remove it, or save elsewhere)"
        )


def _is_safetensors_file(path: str) -> bool:
    with os.fdopen(open_regular(path, "safetensors file"), "rb") as f:
        head = f.read(9)
        size = os.fstat(f.fileno()).st_size
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return n <= min(MAX_HEADER_BYTES, size - 8) and head[8:9] == b"{"


def _is_index_file(path: str) -> bool:
    try:
        _read_weight_map(path)
    except ValueError:
        return False
    return True
