"""Zarr v2 and v3 arrays: opened in place and read chunk by chunk; written chunk by chunk.

Only the metadata is handled here (json): it becomes a chunk table (which file, offset and size
holds each stored chunk of the grid, a v3 shard's index included) and a codec pipeline, and the
engine's chunked reader and writer (`jask/formats/_chunked.py`) decode and encode the chunks
themselves. zarr-python is not needed.

Metadata comes from files Jask did not write: every field is checked for its JSON type and range
before use (ValueError naming the file and the key), every size computed from it is checked to
fit int64, and the chunk grid is never listed whole: only the files stored are looked up, so an
array of 2**40 chunks with a few stored opens as fast as one of a few chunks.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import json
import math
import os
import re
import reprlib
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._dtypes import SUPPORTED, storage_dtype
from .._durable import fsync_folder
from .._files import (
    NotInFileError,
    NotRegularFileError,
    UnsupportedFileError,
    file_kind,
    open_regular,
    read_regular,
)
from .._jax import compat
from .._jax.diskarray import DiskArray
from .._runtime import memory_budget
from ._chunked import check_sizes, chunk_grid, crc32c, open_chunked, write_chunked

MiB = 1 << 20
_EMPTY = (1 << 64) - 1  # a v3 shard index's (offset, nbytes) of a chunk that is not stored
_METADATA_LIMIT = 64 * MiB  # the most bytes of a zarr.json or .zarray read
_MAX_NDIM = 64  # NumPy's, so zarr-python's


@dataclass(frozen=True)
class ChunkedSpec:
    """What `open_chunked` needs to read one array (see jask/formats/_chunked.py)."""

    path: str  # the metadata file, named in every error
    name: str | None  # the array's name inside a group
    dtype: np.dtype
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    codecs: list[tuple[str, int]]  # the decoding pipeline
    files: list[str]
    chunks: np.ndarray  # (n stored, 4) int64: chunk id (ascending), file index, offset, nbytes
    fill_value: float | int | bool


# -- opening ------------------------------------------------------------------------------------


def open_zarr(path, *, name: str | None = None):
    """Opens a Zarr array (v2 or v3) in place, read-only; a group gives a dict of its arrays.

    The chunks are decoded as they are read (zstd, gzip, zlib, blosc, crc32c; v3 shards through
    their index), within the memory budget; a chunk that is not stored reads as the fill value.

    Args:
      path: the array's folder (holding `.zarray` or `zarr.json`, or that file), or a group's.
      name: for a group, the one array to open ("/"-joined, as in the dict).

    Returns:
      A read-only DiskArray, or for a group a dict name → DiskArray of every array in it,
      nested groups included (names "/"-joined).

    Raises:
      ValueError: invalid metadata, a chunk or shard that does not match it (naming the file).
      UnsupportedFileError (a NotImplementedError and a ValueError): a codec, filter or chunk
        grid Jask does not read.
      TypeError: a dtype Jask does not store.
      OSError: a file that cannot be read, or that is not a regular file (a FIFO, a device).

    >>> import numpy as np, jask, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.zarr")
    >>> jask.DiskArray.from_numpy(np.arange(6, dtype=np.float32)).to_zarr(p, chunks=(4,))
    >>> np.asarray(jask.open_zarr(p)).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """
    root = Path(os.fspath(path))
    if root.name in ("zarr.json", ".zarray", ".zgroup") and _exists(root):
        root = root.parent
    kind, _, _ = _node(root)
    if kind == "array":
        if name is not None:
            raise ValueError(
                f"{root}: is a zarr array, not a group; name={name!r} picks an array of a group"
            )
        return open_chunked(**vars(read_spec(root)))
    names = group_arrays(root)
    if name is not None:
        if name not in names:
            raise NotInFileError(
                f"{root}: the zarr group has no array {name!r}; it has {sorted(names)}"
            )
        return open_chunked(**vars(read_spec(root / name, name=name)))
    return {n: open_chunked(**vars(read_spec(root / n, name=n))) for n in sorted(names)}


def group_arrays(root: Path) -> list[str]:
    """The "/"-joined names of the arrays in the zarr group at `root`, nested groups included.

    A folder reached twice (through a symbolic link) is refused: it would be listed forever."""
    found, seen = [], set()
    pending = [(Path(root), "")]
    while pending:
        folder, prefix = pending.pop()
        _visit_once(folder, seen, "zarr group")
        with os.scandir(folder) as entries:
            children = sorted(entries, key=lambda e: e.name, reverse=True)
        for entry in children:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            kind, _, _ = _node(Path(entry.path), missing_ok=True)
            if kind == "array":
                found.append(prefix + entry.name)
            elif kind == "group":
                pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
    return sorted(found)


def _visit_once(folder: Path, seen: set, what: str) -> None:
    st = os.stat(folder)
    if (st.st_dev, st.st_ino) in seen:
        raise ValueError(f"{what} {folder} is a folder reached twice (a symbolic link loop)")
    seen.add((st.st_dev, st.st_ino))


def _exists(path: Path) -> bool:
    """Whether anything is at `path` (links followed): a file of any kind, or a folder."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def _node(folder: Path, missing_ok: bool = False) -> tuple[str | None, int, dict | None]:
    """("array" | "group", zarr format, the parsed zarr.json of a v3 node) of the node at `folder`."""
    if _exists(folder / "zarr.json"):
        meta = _load_json(folder / "zarr.json")
        kind = meta.get("node_type")
        if meta.get("zarr_format") != 3 or kind not in ("array", "group"):
            raise ValueError(
                f"{folder / 'zarr.json'}: not zarr v3 metadata (zarr_format "
                f"{_show(meta.get('zarr_format'))}, node_type {_show(kind)})"
            )
        return kind, 3, meta
    if _exists(folder / ".zarray"):
        return "array", 2, None
    if _exists(folder / ".zgroup"):
        _v2_attributes(folder)
        group = _load_json(folder / ".zgroup")
        if group.get("zarr_format") != 2:
            raise _Meta(folder / ".zgroup", None, group).error(
                "zarr_format", group.get("zarr_format"), "2"
            )
        return "group", 2, None
    if missing_ok:
        return None, 0, None
    if not _exists(folder):
        raise FileNotFoundError(errno.ENOENT, f"{folder}: no such zarr array or group")
    if not folder.is_dir():
        raise NotADirectoryError(
            errno.ENOTDIR, f"{folder}: not a folder; a zarr array or group is a folder"
        )
    raise ValueError(f"{folder}: not a zarr array or group (no zarr.json, .zarray or .zgroup)")


def _v2_attributes(folder: Path) -> None:
    """Checks a v2 node's .zattrs, when there is one, as zarr-python reads it: a JSON object."""
    if _exists(folder / ".zattrs"):
        _load_json(folder / ".zattrs")


def _load_json(path: Path) -> dict:
    data = read_regular(path, "zarr metadata", _METADATA_LIMIT)
    try:
        meta = json.loads(data)
    except RecursionError:
        raise ValueError(f"{path}: invalid zarr metadata, its JSON is nested too deeply") from None
    except ValueError as e:  # json.JSONDecodeError, UnicodeDecodeError, too long an int
        raise ValueError(f"{path}: invalid zarr metadata, not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: invalid zarr metadata, not a JSON object")
    return meta


def read_spec(folder: Path, name: str | None = None) -> ChunkedSpec:
    """The chunk table and codec pipeline of the zarr array at `folder`."""
    folder = Path(folder)
    kind, version, meta = _node(folder)
    if kind != "array":
        raise ValueError(f"{folder}: is a zarr group, not an array")
    if version == 3:
        return _v3_spec(folder, meta, name)
    return _v2_spec(folder, _load_json(folder / ".zarray"), name)


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxstring, _SHOW.maxother, _SHOW.maxlist, _SHOW.maxdict = 3, 60, 60, 8, 6


def _show(value) -> str:
    """A short repr of a metadata value (hostile ones are large or deeply nested)."""
    return _SHOW.repr(value)


_REQUIRED = object()


class _Meta:
    """Reads fields of one metadata object, naming the file (and the array) in every error."""

    def __init__(self, path: Path, name: str | None, meta, where: str | None = None):
        self.path, self.name, self.meta = path, name, meta
        self.where = where or f"{path}" + (f" (array {name!r})" if name else "")

    def error(self, key: str, value, want: str) -> ValueError:
        return ValueError(
            f"{self.where}: invalid zarr metadata: {key} must be {want}, got {_show(value)}"
        )

    def field(self, key: str, default=_REQUIRED):
        if key not in self.meta:
            if default is _REQUIRED:
                raise ValueError(f"{self.where}: invalid zarr metadata, no {key!r}")
            return default
        return self.meta[key]

    def text(self, key: str, default=_REQUIRED) -> str:
        value = self.field(key, default)
        if not isinstance(value, str):
            raise self.error(key, value, "a string")
        return value

    def sub(self, key: str, default=_REQUIRED) -> _Meta:
        """The JSON object at `key` (missing: `default`, an object's fields)."""
        value = self.field(key, default)
        if not isinstance(value, dict):
            raise self.error(key, value, "a JSON object")
        return _Meta(self.path, self.name, value, f"{self.where} ({key})")

    def shape(self, key: str, positive: bool) -> tuple[int, ...]:
        value = self.field(key)
        least = 1 if positive else 0
        ok = (
            isinstance(value, list)
            and len(value) <= _MAX_NDIM
            and all(
                isinstance(n, int) and not isinstance(n, bool) and least <= n <= _INT64_MAX
                for n in value
            )
        )
        if not ok:
            kind = "positive" if positive else "non-negative"
            raise self.error(key, value, f"a list of at most {_MAX_NDIM} {kind} 64-bit ints")
        return tuple(value)


_INT64_MAX = 2**63 - 1


def _grid_shapes(m: _Meta, shape, chunk_shape, what="chunks") -> None:
    if len(chunk_shape) != len(shape):
        raise ValueError(
            f"{m.where}: {what} {list(chunk_shape)} do not match the array's shape {list(shape)} "
            f"({len(chunk_shape)} axes, not {len(shape)})"
        )


def _unsupported_dtype(m: _Meta, dtype, numpy_name: str | None = None) -> TypeError:
    also = f" ({numpy_name})" if numpy_name and numpy_name != dtype else ""
    hint = "; open the group's other arrays with name=" if m.name else ""
    return TypeError(
        f"{m.where}: zarr dtype {_show(dtype)}{also} is not supported; Jask stores "
        f"{', '.join(SUPPORTED)}{hint}"
    )


# -- zarr v2 ------------------------------------------------------------------------------------

# numcodecs ids (the engine's codec names) and the settings numcodecs takes (it refuses others).
_V2_COMPRESSORS = {
    "zstd": {"level", "checksum"},
    "blosc": {"cname", "clevel", "shuffle", "blocksize", "typesize"},
    "gzip": {"level"},
    "zlib": {"level"},
}


def _v2_spec(folder: Path, meta: dict, name: str | None) -> ChunkedSpec:
    m = _Meta(folder / ".zarray", name, meta)
    _v2_attributes(folder)
    if m.field("zarr_format") != 2:
        raise m.error("zarr_format", meta["zarr_format"], "2")
    shape, chunk_shape = m.shape("shape", positive=False), m.shape("chunks", positive=True)
    _grid_shapes(m, shape, chunk_shape)
    dtype, big_endian = _v2_dtype(m, m.field("dtype"))
    check_sizes(shape, chunk_shape, dtype, m.where)
    filters = m.field("filters", None)
    if not isinstance(filters, (list, type(None))):
        raise m.error("filters", filters, "a list or null")
    if filters:
        ids = [f.get("id") if isinstance(f, dict) else f for f in filters]
        raise UnsupportedFileError(
            f"{m.where}: zarr v2 filters are not supported (has {_show(ids)})"
        )
    codecs = []
    if m.field("compressor", None) is not None:
        compressor = m.sub("compressor")
        cid = compressor.field("id")
        if not isinstance(cid, str) or cid not in _V2_COMPRESSORS:
            raise UnsupportedFileError(
                f"{m.where}: zarr v2 compressor {_show(cid)} is not supported (Jask reads "
                f"{', '.join(_V2_COMPRESSORS)} or none)"
            )
        for key in compressor.meta.keys() - {"id"} - _V2_COMPRESSORS[cid]:
            raise ValueError(f"{compressor.where}: invalid zarr metadata: {cid} takes no {key!r}")
        codecs.append((cid, 0))
    if big_endian:
        codecs.append(("byteswap", dtype.itemsize))
    order = m.field("order")  # required, as fill_value: zarr-python refuses metadata without
    if order not in ("C", "F"):
        raise m.error("order", order, "'C' or 'F'")
    if order == "F" and len(shape) > 1:
        codecs.append(("order_f", 0))
    separator = m.field("dimension_separator", ".")
    if separator not in (".", "/"):
        raise m.error("dimension_separator", separator, "'.' or '/'")
    fill = _fill_value(m, m.field("fill_value"), dtype, version=2)
    files, chunks = _whole_file_chunks(m, folder, chunk_grid(shape, chunk_shape), None, separator)
    return ChunkedSpec(str(m.path), name, dtype, shape, chunk_shape, codecs, files, chunks, fill)


def _v2_dtype(m: _Meta, text) -> tuple[np.dtype, bool]:
    try:
        raw = np.dtype(text) if isinstance(text, str) and len(text) < 64 else None
    except (TypeError, ValueError, SyntaxError, OverflowError):  # what np.dtype raises for garbage
        raw = None
    if raw is None:
        raise _unsupported_dtype(m, text)
    try:
        dtype = storage_dtype(raw.newbyteorder("="))
    except (TypeError, ValueError):
        raise _unsupported_dtype(m, text, raw.name) from None
    if raw.byteorder == ">" and dtype.kind == "c":  # byteswap swaps whole items, not parts
        raise _unsupported_dtype(m, text, raw.name)
    return dtype, raw.byteorder == ">" and dtype.itemsize > 1


# -- zarr v3 ------------------------------------------------------------------------------------

# The spec's core data types and the extensions' names for bfloat16 and the float8s (the
# ml_dtypes names): every one Jask stores.
_V3_DTYPES = {name: storage_dtype(name) for name in SUPPORTED}
_V3_BYTES_CODECS = ("zstd", "gzip", "blosc", "crc32c")  # the engine's codec names too


_V3_ARRAY_KEYS = {
    "zarr_format", "node_type", "data_type", "shape", "chunk_grid", "chunk_key_encoding",
    "fill_value", "codecs", "attributes", "storage_transformers", "dimension_names",
}  # fmt: skip


def _v3_spec(folder: Path, meta: dict, name: str | None) -> ChunkedSpec:
    m = _Meta(folder / "zarr.json", name, meta)
    for key in meta.keys() - _V3_ARRAY_KEYS:
        # The spec's rule for extensions: one a reader may ignore says so.
        if not (isinstance(meta[key], dict) and meta[key].get("must_understand") is False):
            raise m.error(key, meta[key], 'absent (unknown), or {"must_understand": false}')
    shape = m.shape("shape", positive=False)
    data_type = m.field("data_type")
    if not isinstance(data_type, str) or data_type not in _V3_DTYPES:
        raise _unsupported_dtype(m, data_type)
    dtype = _V3_DTYPES[data_type]
    grid = m.sub("chunk_grid")
    if grid.text("name") != "regular":
        raise UnsupportedFileError(
            f"{m.where}: chunk_grid {_show(grid.meta)} is not supported (only regular)"
        )
    outer_shape = grid.sub("configuration").shape("chunk_shape", positive=True)
    _grid_shapes(m, shape, outer_shape, "chunk_grid chunk_shape")
    check_sizes(shape, outer_shape, dtype, m.where)
    transformers = m.field("storage_transformers", [])
    if not isinstance(transformers, list):
        raise m.error("storage_transformers", transformers, "a list")
    if transformers:
        raise UnsupportedFileError(f"{m.where}: storage_transformers are not supported")
    prefix, separator = _v3_key_encoding(m)
    fill = _fill_value(m, m.field("fill_value"), dtype, version=3)
    codecs, sharding = _v3_codecs(m, m.field("codecs"), dtype, len(shape))
    grid = chunk_grid(shape, outer_shape)
    if sharding is None:
        files, chunks = _whole_file_chunks(m, folder, grid, prefix, separator)
        return ChunkedSpec(
            str(m.path), name, dtype, shape, outer_shape, codecs, files, chunks, fill
        )
    inner_shape, codecs, index = sharding
    _grid_shapes(m, shape, inner_shape, "sharding_indexed chunk_shape")
    if any(s % c for s, c in zip(outer_shape, inner_shape)):
        raise ValueError(
            f"{m.where}: the shard shape {list(outer_shape)} is not a multiple of the inner "
            f"chunk shape {list(inner_shape)}"
        )
    check_sizes(shape, inner_shape, dtype, m.where)
    shards = _stored_chunks(m, folder, grid, prefix, separator)
    files, chunks = _shard_chunks(m, shards, shape, outer_shape, inner_shape, index)
    return ChunkedSpec(str(m.path), name, dtype, shape, inner_shape, codecs, files, chunks, fill)


def _v3_key_encoding(m: _Meta) -> tuple[str | None, str]:
    encoding = m.sub("chunk_key_encoding")
    kind = encoding.text("name")
    if kind not in ("default", "v2"):
        raise UnsupportedFileError(
            f"{m.where}: chunk_key_encoding {_show(encoding.meta)} is not supported"
        )
    config = encoding.sub("configuration", {})
    if config.meta.keys() - {"separator"}:
        raise config.error("keys", sorted(config.meta), "['separator'] or none")
    separator = config.field("separator", "/" if kind == "default" else ".")
    if separator not in (".", "/"):
        raise m.error("the chunk key separator", separator, "'.' or '/'")
    return ("c" if kind == "default" else None), separator


def _int(v) -> bool:
    return isinstance(v, int)  # zarr-python's test: a bool passes


# Per codec: whether zarr-python requires its configuration, and the keys it takes with the
# values it accepts (it refuses any other key). Jask decodes without the compressors' settings,
# but refuses the metadata zarr-python refuses.
_V3_CONFIGS = {
    "zstd": (
        True,
        {"level": lambda v: _int(v) and v <= 22, "checksum": lambda v: isinstance(v, bool)},
    ),
    "gzip": (True, {"level": lambda v: _int(v) and 0 <= v <= 9}),
    "blosc": (
        True,
        {
            "typesize": lambda v: _int(v) and v > 0,
            "cname": lambda v: v in ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"),
            "clevel": _int,
            "shuffle": lambda v: v in ("noshuffle", "shuffle", "bitshuffle"),
            "blocksize": _int,
        },
    ),
    "crc32c": (False, {}),
    "bytes": (False, {"endian": lambda v: v in ("little", "big", None)}),
    "transpose": (True, {"order": lambda v: isinstance(v, list)}),
    "sharding_indexed": (
        True,
        {k: lambda v: True for k in ("chunk_shape", "codecs", "index_codecs", "index_location")},
    ),
}


def _codec(m: _Meta, codec, at: int) -> tuple[str, _Meta]:
    """A codec object's name, and its configuration (an object; {} when absent)."""
    c = _Meta(m.path, m.name, codec, f"{m.where} (codec {at})")
    if not isinstance(codec, dict):
        raise m.error(f"codec {at}", codec, "a JSON object")
    name = c.text("name")
    required, keys = _V3_CONFIGS.get(name, (False, None))
    if required and "configuration" not in codec:
        raise ValueError(f"{c.where}: invalid zarr metadata, codec {name} has no 'configuration'")
    config = c.sub("configuration", {})
    for key, value in config.meta.items() if keys is not None else ():
        if key not in keys:
            raise ValueError(f"{config.where}: invalid zarr metadata: {name} takes no {key!r}")
        if not keys[key](value):
            raise config.error(key, value, f"a valid {name} {key}")
    return name, config


def _v3_codecs(m: _Meta, codecs, dtype: np.dtype, ndim: int, in_shard: bool = False):
    """The decoding pipeline of a v3 codec list, and for a sharded array the inner chunk shape,
    the inner decoding pipeline and the index's codecs: (codecs, None) or ([], (...))."""
    if not isinstance(codecs, list):
        raise m.error("codecs", codecs, "a list of objects")
    parsed = [_codec(m, c, i) for i, c in enumerate(codecs)]
    names = [name for name, _ in parsed]
    serializers = [i for i, n in enumerate(names) if n in ("bytes", "sharding_indexed")]
    if len(serializers) != 1:
        raise UnsupportedFileError(
            f"{m.where}: codecs {_show(names)} need exactly one of bytes or sharding_indexed"
        )
    at = serializers[0]
    before, (kind, config), after = parsed[:at], parsed[at], parsed[at + 1 :]
    if kind == "sharding_indexed":
        if before or after or in_shard:
            raise UnsupportedFileError(
                f"{m.where}: codecs {_show(names)}: only sharding_indexed alone is supported "
                f"around a shard (no codec before or after it, no sharding inside it)"
            )
        return [], _sharding(config, dtype, ndim)
    decode = []
    for name, _ in reversed(after):
        if name not in _V3_BYTES_CODECS:
            raise UnsupportedFileError(
                f"{m.where}: zarr v3 codec {_show(name)} is not supported (Jask reads "
                f"bytes, transpose, {', '.join(_V3_BYTES_CODECS)}, sharding_indexed)"
            )
        decode.append((name, 0))
    if _endian(config, dtype) == "big" and dtype.itemsize > 1:
        # a complex number is two floats, each swapped in place (not the pair as one item)
        group = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
        decode.append(("byteswap", group))
    for name, codec_config in reversed(before):
        decode += _transpose(m, name, codec_config, ndim)
    return decode, None


def _endian(config: _Meta, dtype: np.dtype) -> str:
    """The bytes codec's endian: little when absent (zarr-python's default on every system Jask
    runs on); null only for one-byte dtypes."""
    endian = config.field("endian", "little")
    if endian is None and dtype.itemsize == 1:
        return "little"
    if endian not in ("little", "big"):
        raise config.error("the bytes codec's endian", endian, "'little' or 'big'")
    return endian


def _transpose(m: _Meta, name: str, config: _Meta, ndim: int) -> list[tuple[str, int]]:
    if name != "transpose":
        raise UnsupportedFileError(
            f"{m.where}: zarr v3 codec {_show(name)} before bytes is not supported (only transpose)"
        )
    order = config.field("order", None)
    if order == list(range(ndim)):
        return []
    if order == list(range(ndim))[::-1]:
        return [("order_f", 0)]
    raise UnsupportedFileError(
        f"{m.where}: transpose order {_show(order)} is not supported (only the identity and "
        f"{list(range(ndim))[::-1]}, Fortran order)"
    )


@dataclass(frozen=True)
class _ShardIndex:
    at_end: bool
    big_endian: bool
    crc32c: bool


def _sharding(inner: _Meta, dtype: np.dtype, ndim: int):
    inner.where = f"{inner.where} (sharding_indexed)"
    inner_shape = inner.shape("chunk_shape", positive=True)
    inner_codecs, _ = _v3_codecs(inner, inner.field("codecs"), dtype, ndim, in_shard=True)
    index_codecs = inner.field("index_codecs")
    if not isinstance(index_codecs, list):
        raise inner.error("index_codecs", index_codecs, "a list of objects")
    parsed = [_codec(inner, c, i) for i, c in enumerate(index_codecs)]
    names = [name for name, _ in parsed]
    if names not in (["bytes"], ["bytes", "crc32c"]):
        raise UnsupportedFileError(
            f"{inner.where}: index_codecs {_show(names)} are not supported (bytes, optionally "
            f"crc32c)"
        )
    endian = _endian(parsed[0][1], np.dtype(np.uint64))
    location = inner.field("index_location", "end")
    if location not in ("start", "end"):
        raise inner.error("index_location", location, "'start' or 'end'")
    index = _ShardIndex(location == "end", endian == "big", len(names) == 2)
    return inner_shape, inner_codecs, index


# -- the chunk table ----------------------------------------------------------------------------

_INDEX = re.compile(r"0|[1-9][0-9]{0,18}")  # a chunk index as zarr-python writes it


def _stored_chunks(m: _Meta, folder: Path, grid, prefix: str | None, separator: str):
    """(chunk id, chunk index, path) of every chunk of `grid` stored under `folder`, by id.

    Only the files stored are looked at (the grid may hold 2**40 chunks), and only names that
    are a chunk's key count (zarr-python reads no other). A key naming a FIFO, a device or a
    folder is refused (NotRegularFileError); a link to nothing is a chunk not stored.
    """
    if 0 in grid:
        return []
    # The parts of a key: the prefix, then one index per axis (an int: the axis); "0" for a
    # 0-d array without a prefix.
    parts = ([prefix] if prefix else []) + list(range(len(grid))) or ["0"]
    found = []

    def matches(part, name: str) -> bool:
        if isinstance(part, str):
            return name == part
        return _INDEX.fullmatch(name) is not None and int(name) < grid[part]

    def index_of(names) -> tuple[int, ...]:
        return tuple(int(n) for p, n in zip(parts, names) if not isinstance(p, str))

    def leaf(entry, names) -> None:
        if not entry.is_file() and _dangling(entry, m):
            return
        index = index_of(names)
        found.append((_ravel(index, grid), index, Path(entry.path)))

    if separator == ".":
        with os.scandir(folder) as entries:
            for entry in entries:
                names = entry.name.split(".")
                if len(names) == len(parts) and all(map(matches, parts, names)):
                    leaf(entry, names)
    else:
        seen = set()
        pending = [(folder, [])]
        while pending:
            at, names = pending.pop()
            part = parts[len(names)]
            last = len(names) + 1 == len(parts)
            if not last:
                _visit_once(at, seen, f"{m.where}: chunk folder")
            with os.scandir(at) as entries:
                for entry in entries:
                    if not matches(part, entry.name):
                        continue
                    if last:
                        leaf(entry, names + [entry.name])
                    elif entry.is_dir():
                        pending.append((Path(entry.path), names + [entry.name]))
    found.sort(key=lambda f: f[0])
    return found


def _dangling(entry: os.DirEntry, m: _Meta) -> bool:
    """True for a link to nothing (a chunk not stored); raises for what is not a regular file."""
    try:
        mode = entry.stat().st_mode
    except FileNotFoundError:
        return True
    if stat.S_ISREG(mode):
        return False
    raise NotRegularFileError(
        errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL,
        f"{m.where}: chunk {entry.path} is {file_kind(mode)}, not a regular file; Jask reads "
        "regular files only",
    )


def _ravel(index, grid) -> int:
    """The C-order id of chunk `index` of `grid` (below the grid's size, so it fits int64)."""
    chunk_id = 0
    for i, n in zip(index, grid):
        chunk_id = chunk_id * n + i
    return chunk_id


def _whole_file_chunks(m: _Meta, folder: Path, grid, prefix, separator):
    """One chunk per file (the whole file); a chunk without a file is not stored."""
    stored = _stored_chunks(m, folder, grid, prefix, separator)
    chunks = np.zeros((len(stored), 4), np.int64)
    chunks[:, 3] = -1
    for i, (chunk_id, _, _) in enumerate(stored):
        chunks[i, :2] = chunk_id, i
    return [str(path) for _, _, path in stored], chunks


def _shard_chunks(m, shards, shape, shard_shape, inner_shape, index: _ShardIndex):
    """The chunk table over the inner chunk grid, from the index of every stored shard."""
    per_shard = tuple(s // c for s, c in zip(shard_shape, inner_shape))
    grid = chunk_grid(shape, inner_shape)
    files, tables = [], []
    for _, shard, path in shards:
        offsets = _read_shard_index(m, path, math.prod(per_shard), index)
        local = np.flatnonzero(offsets[:, 0] != -1)
        if len(grid) == 0:
            ids = local  # a 0-d array: one inner chunk, id 0
        else:
            where = np.unravel_index(local, per_shard)
            at = [i + s * p for i, s, p in zip(where, shard, per_shard)]
            inside = np.logical_and.reduce([a < n for a, n in zip(at, grid)])
            local = local[inside]
            ids = np.ravel_multi_index(tuple(a[inside] for a in at), grid)
        rows = np.empty((len(local), 4), np.int64)
        rows[:, 0], rows[:, 1], rows[:, 2:] = ids, len(files), offsets[local]
        files.append(str(path))
        tables.append(rows)
    table = np.concatenate(tables) if tables else np.zeros((0, 4), np.int64)
    return files, table[np.argsort(table[:, 0], kind="stable")]


def _read_shard_index(m: _Meta, path: Path, n: int, index: _ShardIndex) -> np.ndarray:
    """A shard's (offset, nbytes) per inner chunk, (n, 2) int64; (-1, -1) where not stored.

    The index's size is checked against the shard file's before it is read: a shard of
    2**40 inner chunks needs a 16 TiB file."""
    size = 16 * n + (4 if index.crc32c else 0)
    fd = open_regular(path, f"{m.where}: zarr shard")
    try:
        file_size = os.fstat(fd).st_size
        if file_size < size:
            raise ValueError(
                f"{m.where}: shard {path} is truncated: {file_size} bytes, less than its index "
                f"of {n} chunks ({size} bytes)"
            )
        # The index is read whole into memory: a sparse file can claim any size for free.
        budget = memory_budget()
        if size > budget:
            raise MemoryError(
                f"{m.where}: shard {path}: its index of {n} inner chunks is {size} bytes, more "
                f"than the memory budget of {budget} bytes; raise it with "
                f"jask.set_memory_budget() to open this array"
            )
        start = file_size - size if index.at_end else 0
        pieces, done = [], 0
        while done < size:  # one read returns at most about 2 GiB
            piece = os.pread(fd, min(size - done, 1 << 30), start + done)
            if not piece:
                break
            pieces.append(piece)
            done += len(piece)
        raw = b"".join(pieces)
    finally:
        os.close(fd)
    if len(raw) != size:
        raise ValueError(f"{m.where}: shard {path} shrank while its index was read")
    if index.crc32c:
        want = int.from_bytes(raw[-4:], "little")
        got = crc32c(raw[:-4])
        if got != want:
            raise ValueError(
                f"{m.where}: shard {path}: the index's crc32c is {got:#010x}, its stored "
                f"checksum {want:#010x} (corrupt shard)"
            )
    pairs = np.frombuffer(raw, ">u8" if index.big_endian else "<u8", count=2 * n).reshape(n, 2)
    offset, nbytes = pairs[:, 0], pairs[:, 1]
    empty = (offset == _EMPTY) & (nbytes == _EMPTY)
    # Each below 2**63, so their sum does not wrap around.
    past_end = (offset >= 1 << 63) | (nbytes >= 1 << 63) | (offset + nbytes > file_size)
    bad = np.flatnonzero(~empty & past_end)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{m.where}: shard {path}: the index places inner chunk {i} at offset "
            f"{int(offset[i])}, {int(nbytes[i])} bytes, past the end of the {file_size}-byte file"
        )
    out = pairs.astype(np.int64)
    out[empty] = -1
    return out


# -- fill values --------------------------------------------------------------------------------

_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _fill_value(m: _Meta, value, dtype: np.dtype, version: int):
    """A Python scalar of `dtype` for a zarr fill_value: in v2, null reads as 0 (as zarr-python
    reads it) and floats have no hex form; v3 has no null."""
    if value is None and version == 2:
        return False if dtype == np.bool_ else 0
    if dtype == np.bool_:
        if isinstance(value, bool):
            return value
    elif dtype.kind in "iu":
        if isinstance(value, int) and not isinstance(value, bool):
            if np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
                return value
    elif dtype.kind == "c":  # v3: [real, imag]; v2 as numpy writes it: a number
        parts = value if isinstance(value, list) and len(value) == 2 else [value, 0]
        if all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in parts):
            if parts[1] == 0:  # the engine fills with one real value
                return float(parts[0])
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int past float64's range
            pass
    elif isinstance(value, str) and value in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[value]
    elif version == 3 and isinstance(value, str) and re.fullmatch(r"0x[0-9a-fA-F]{1,16}", value):
        bits = int(value, 16)
        if bits < 1 << (8 * dtype.itemsize):
            uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
            return float(np.array([bits], uint).view(dtype)[0])
    raise ValueError(f"{m.where}: invalid fill_value {_show(value)} for dtype {dtype.name}")


# -- writing ------------------------------------------------------------------------------------

_LEVELS = {"zstd": 3, "gzip": 5, "blosc": 5}
_BLOSC_LZ4, _BLOSC_SHUFFLE = 1, 1  # write_chunked's blosc cname code, c-blosc's byte shuffle
# zarr v2 names numpy's typestrings: the dtypes that have one (not bfloat16 or the float8s).
_V2_DTYPES = {name: np.dtype(name).str for name in SUPPORTED if np.dtype(name).kind in "biufc"}


def to_zarr(x, path, chunks=None, *, zarr_format=3, codec="zstd", level=None, overwrite=False):
    """Writes `x` to a new Zarr array at `path`, chunk by chunk within the memory budget.

    Args:
      x: a DiskArray (anything else is written to a scratch DiskArray first).
      path: the array's folder; it must not exist unless `overwrite` (and then it must be a
        zarr array, which is replaced as a whole, never a folder holding anything else).
      chunks: the chunk shape; by default full along every axis but the first, about 8 MiB
        (less under a small memory budget).
      zarr_format: 3 (`zarr.json`, bytes + codec) or 2 (`.zarray` with a numcodecs compressor).
      codec: "zstd", "gzip", "blosc" (lz4 with byte shuffle) or None.
      level: the codec's compression level (default zstd 3, gzip 5, blosc 5).
      overwrite: replace an existing zarr array at `path`.

    The array is written into a new folder beside `path` and renamed into place at the end, so
    a crash leaves either the old array or the new one at `path`, never a mix.

    >>> import numpy as np, jask, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.zarr")
    >>> jask.to_zarr(np.ones((3, 2), np.float32), p, zarr_format=2, codec="blosc")
    >>> jask.open_zarr(p).shape
    (3, 2)
    """
    if compat.is_tracer(x) or (isinstance(x, DiskArray) and not x._owned):
        raise TypeError("jask.to_zarr: cannot write a traced array; write the concrete result")
    if not isinstance(x, DiskArray):
        x = DiskArray.from_numpy(np.asarray(x))
    path = Path(os.fspath(path))
    if zarr_format not in (2, 3):
        raise ValueError(
            f"jask.to_zarr({str(path)!r}): zarr_format must be 2 or 3, got {zarr_format!r}"
        )
    if codec not in (*_LEVELS, None):
        raise ValueError(
            f"jask.to_zarr({str(path)!r}): codec must be 'zstd', 'gzip', 'blosc' or "
            f"None, got {codec!r}"
        )
    if zarr_format == 2 and x.dtype.name not in _V2_DTYPES:
        raise TypeError(
            f"jask.to_zarr({str(path)!r}): zarr v2 has no {x.dtype.name} dtype; "
            f"write zarr_format=3 or x.astype(jnp.float32)"
        )
    chunk_shape = _chunk_shape(x, chunks, path)
    level = _LEVELS.get(codec) if level is None else int(level)
    _check_replaceable(path, overwrite)
    if path.exists() and path.resolve() in Path(x.path).resolve().parents:
        raise ValueError(
            f"jask.to_zarr: {x.path} is read from the zarr array {path} being replaced; write "
            f"the new array to another path"
        )
    encode, meta = _encoding(x, chunk_shape, zarr_format, codec, level)
    tmp = path.parent / f".{path.name}.jask-tmp-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        prefix, separator = ("c", "/") if zarr_format == 3 else (None, ".")
        keys = _chunk_keys(x.shape, chunk_shape, prefix, separator)
        folders = {(tmp / k).parent for k in keys}
        for folder in sorted(folders):
            folder.mkdir(parents=True, exist_ok=True)
        write_chunked(x, chunk_shape=chunk_shape, codecs=encode, paths=[str(tmp / k) for k in keys])
        for file, text in meta.items():
            _write_durably(tmp / file, text)
        for folder in sorted(folders | {tmp}, key=lambda p: -len(p.parts)):
            fsync_folder(folder)
        _move_into_place(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _chunk_shape(x, chunks, path: Path) -> tuple[int, ...]:
    if chunks is not None:
        chunks = tuple(chunks)
        if len(chunks) != x.ndim or not all(
            isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c > 0 for c in chunks
        ):
            raise ValueError(
                f"jask.to_zarr({str(path)!r}): chunks must be {x.ndim} positive "
                f"ints for an array of shape {x.shape}, got {chunks!r}"
            )
        chunks = tuple(int(c) for c in chunks)
        check_sizes(x.shape, chunks, np.dtype(x.dtype), f"jask.to_zarr({str(path)!r})")
        return chunks
    # A chunk is decoded whole into memory when read: keep it a small part of the budget.
    target = max(x.dtype.itemsize, min(8 * MiB, memory_budget() // 16))
    out = [max(1, n) for n in x.shape]
    inner = x.dtype.itemsize
    for axis in reversed(range(x.ndim)):
        if inner * out[axis] > target:
            out[axis] = max(1, target // inner)
            out[:axis] = [1] * axis
            break
        inner *= out[axis]
    return tuple(out)


def _encoding(x, chunk_shape, zarr_format, codec, level):
    """The encoding pipeline for write_chunked and the metadata files (name → text)."""
    encode = []
    if codec == "zstd":
        encode.append(("zstd", level))
    elif codec == "gzip":
        encode.append(("gzip", level))
    elif codec == "blosc":
        encode.append(("blosc", level | _BLOSC_SHUFFLE << 8 | _BLOSC_LZ4 << 16))
    fill = (
        False
        if x.dtype == np.bool_
        else 0
        if x.dtype.kind in "iu"
        else [0.0, 0.0]
        if x.dtype.kind == "c" and zarr_format == 3
        else 0.0
    )
    if zarr_format == 2:
        compressor = {
            None: None,
            "zstd": {"id": "zstd", "level": level, "checksum": False},
            "gzip": {"id": "gzip", "level": level},
            "blosc": {"id": "blosc", "cname": "lz4", "clevel": level, "shuffle": 1, "blocksize": 0},
        }[codec]
        zarray = {
            "zarr_format": 2,
            "shape": list(x.shape),
            "chunks": list(chunk_shape),
            "dtype": _V2_DTYPES[x.dtype.name],
            "compressor": compressor,
            "fill_value": fill,
            "order": "C",
            "filters": None,
            "dimension_separator": ".",
        }
        return encode, {".zarray": _dump(zarray), ".zattrs": "{}"}
    configuration = {
        None: None,
        "zstd": {"level": level, "checksum": False},
        "gzip": {"level": level},
        "blosc": {
            "cname": "lz4",
            "clevel": level,
            "shuffle": "shuffle",
            "typesize": x.dtype.itemsize,
            "blocksize": 0,
        },
    }[codec]
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if codec is not None:
        codecs.append({"name": codec, "configuration": configuration})
    zarr_json = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(x.shape),
        "data_type": x.dtype.name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": codecs,
        "attributes": {},
    }
    return encode, {"zarr.json": _dump(zarr_json)}


def _dump(meta: dict) -> str:
    return json.dumps(meta, indent=2) + "\n"


_ARRAY_FILES = re.compile(r"(\.zarray|\.zattrs|zarr\.json|(c[./])?\d+([./]\d+)*|c)")


def _check_replaceable(path: Path, overwrite: bool) -> None:
    """Raises unless `path` is free, or `overwrite` and it holds one zarr array and nothing else."""
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"jask.to_zarr: {path.parent} (the folder of {path}) does not exist"
        )
    if not (path.exists() or path.is_symlink()):
        return
    if not overwrite:
        raise FileExistsError(
            f"jask.to_zarr: {path} exists; pass overwrite=True to replace a zarr array"
        )
    kind, _, _ = (None, 0, None) if not path.is_dir() or path.is_symlink() else _node(path, True)
    if kind != "array":
        raise FileExistsError(
            f"jask.to_zarr: {path} exists and is not a zarr array: not replacing it"
        )
    for rel in sorted(_stored_keys(path)):
        if not _ARRAY_FILES.fullmatch(rel):
            raise FileExistsError(
                f"jask.to_zarr: {path} holds {rel!r}, which is not part of a zarr array: not "
                f"replacing it"
            )


def _chunk_keys(shape, chunk_shape, prefix: str | None, separator: str) -> list[str]:
    """Every chunk's key (its path under the array's folder), in C order of the grid: the
    writer's, which writes every chunk."""
    grid = chunk_grid(shape, chunk_shape)
    parts = [] if prefix is None else [prefix]
    if not grid:
        return [prefix if prefix is not None else "0"]
    return [
        separator.join(parts + [str(i) for i in index])
        for index in itertools.product(*(range(g) for g in grid))
    ]


def _stored_keys(folder: Path) -> set[str]:
    """The relative paths ("/"-separated) of every file under `folder` (links not followed)."""
    found = set()
    for root, _, names in os.walk(folder):
        rel = os.path.relpath(root, folder)
        base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found.update(base + n for n in names)
    return found


def _write_durably(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fdatasync(f.fileno())


def _move_into_place(tmp: Path, path: Path) -> None:
    """Renames the finished array at `tmp` to `path`; an existing array there is swapped out in
    one step (renameat2 RENAME_EXCHANGE) where the system offers it, then deleted."""
    if not path.exists():
        os.rename(tmp, path)
    elif not _exchange(tmp, path):
        old = path.parent / f".{path.name}.jask-old-{secrets.token_hex(4)}"
        os.rename(path, old)
        os.rename(tmp, path)
        tmp = old
    fsync_folder(path.parent)
    if tmp.exists():
        shutil.rmtree(tmp)  # the replaced array


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swaps two paths (Linux renameat2); False where that is not available."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
