"""The engine's chunked arrays: encoded chunks read in place, and the chunk writer.

The interface the format front-ends (Zarr, HDF5, .npz) share; see
``open_chunked`` and ``write_chunked``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import _engine, _progress, _runtime
from .._api.io import in_jax_dtype
from .._dtypes import dtype_code, dtype_from_code, storage_dtype
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._shapes import MAX_FILE_BYTES, as_int, as_shape, check_nbytes

DECODERS = frozenset(
    {
        "zstd",
        "zlib",
        "gzip",
        "deflate",
        "blosc",
        "shuffle",
        "crc32c",
        "fletcher32",
        "byteswap",
        "skip",
        "order_f",
    }
)
ENCODERS = frozenset(
    {"zstd", "zlib", "gzip", "deflate", "blosc", "shuffle", "crc32c", "byteswap", "order_f"}
)


def _codec_list(codecs, what: str, known: frozenset) -> list[tuple[str, int]]:
    steps = []
    for step in codecs:
        if not (isinstance(step, tuple) and len(step) == 2 and isinstance(step[0], str)):
            raise TypeError(f"{what}: each codec must be a (name, int) tuple, got {step!r}")
        name, param = step[0], as_int(step[1], f"{what}: the parameter of codec {step[0]!r}")
        if name not in known:
            raise NotImplementedError(
                f"{what}: unknown codec {name!r} (Jask handles {', '.join(sorted(known))})"
            )
        if param < 0:
            raise ValueError(f"{what}: codec {name!r} has a negative parameter {param}")
        steps.append((name, param))
    return steps


def _chunk_shape(shape, chunk_shape, what: str) -> tuple[int, ...]:
    chunk_shape = as_shape(chunk_shape, f"{what}: chunk_shape")
    if len(chunk_shape) != len(shape):
        raise ValueError(
            f"{what}: chunk_shape {chunk_shape} must have as many axes as the shape {shape}"
        )
    if any(c <= 0 for c in chunk_shape):
        raise ValueError(f"{what}: every chunk dimension must be positive, got {chunk_shape}")
    return chunk_shape


def chunk_grid(shape, chunk_shape) -> tuple[int, ...]:
    """Chunks per axis: edge chunks count whole."""
    return tuple(-(-s // c) for s, c in zip(shape, chunk_shape))


def check_sizes(shape, chunk_shape, dtype: np.dtype, what: str) -> None:
    """ValueError naming `what` unless the array's bytes and one chunk's fit a file offset
    (int64): every size the engine derives from them (the grid, strides, offsets) then fits.

    >>> check_sizes((2, 3), (2**62 + 1, 3), np.dtype(np.float32), "a.zarr")
    Traceback (most recent call last):
    ...
    ValueError: a.zarr: a chunk of (4611686018427387905, 3) float32 is 55340232221128654860 ...
    """
    check_nbytes(tuple(shape), dtype, what)
    chunk_bytes = math.prod(chunk_shape) * dtype.itemsize
    if chunk_bytes > MAX_FILE_BYTES:
        raise ValueError(
            f"{what}: a chunk of {tuple(chunk_shape)} {dtype} is {chunk_bytes} bytes, more than "
            f"the {MAX_FILE_BYTES} (2**63 - 1) bytes a file offset can address"
        )


def open_chunked(
    path, *, dtype, shape, chunk_shape, codecs, files, chunks, fill_value=0, name=None
) -> DiskArray:
    """A read-only DiskArray whose elements live in encoded chunks, read in place.

    Args:
      path: the file that names the array (a Zarr ``.zarray``/``zarr.json``, the
        .h5 or .npz file); errors name it and `name`.
      dtype: the elements' dtype after decoding (little-endian; Jask's dtypes).
      shape: the array's shape.
      chunk_shape: the shape of every chunk (edge chunks are stored full size).
      codecs: the decoding pipeline, ``(name, int)`` steps in the order applied.
      files: the paths holding chunk bytes.
      chunks: int64 array of shape (number of chunks, 3), one row per chunk of
        the grid in C order: ``(file index, offset, nbytes)``; file index -1:
        not stored (reads as `fill_value`); nbytes -1: the rest of the file. Or
        of shape (n, 4), the stored chunks only: ``(chunk id, file index,
        offset, nbytes)``, ids (C order in the grid) ascending; the grid may
        then be far larger than any table of it.
      fill_value: the value of chunks not stored (NaN allowed for floats).
      name: the array's name inside `path` (a dataset, a member), for errors.

    Returns:
      The DiskArray (read-only).
    """
    path = os.fspath(path)
    what = f"{path} ({name})" if name else path
    shape = as_shape(shape, what)
    chunk_shape = _chunk_shape(shape, chunk_shape, what)
    try:
        dt = storage_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None
    check_sizes(shape, chunk_shape, dt, what)
    steps = _codec_list(codecs, what, DECODERS)
    files = [os.fspath(f) for f in files]
    table = np.asarray(chunks)
    n_chunks = math.prod(chunk_grid(shape, chunk_shape))
    dense = table.ndim == 2 and table.shape == (n_chunks, 3)
    sparse = table.ndim == 2 and table.shape[1:] == (4,)
    if table.dtype != np.int64 or not (dense or sparse):
        raise ValueError(
            f"{what}: chunks must be an int64 array of shape ({n_chunks}, 3) (a grid of "
            f"{chunk_grid(shape, chunk_shape)} chunks) or (stored chunks, 4), got "
            f"{table.dtype} of shape {table.shape}"
        )
    try:
        with np.errstate(over="ignore"):  # a float fill past the dtype's range reads as inf
            fill = np.array(fill_value).astype(dt, casting="unsafe").tobytes()
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"{what}: fill_value {fill_value!r} is not a {dt} value ({e})") from None
    _runtime.ensure_scratch()
    h = _engine.open_chunked(
        path,
        name or "",
        dtype_code(dt),
        list(shape),
        list(chunk_shape),
        steps,
        files,
        np.ascontiguousarray(table),
        fill,
    )
    code, shp, *_ = _engine.info(h)
    return in_jax_dtype(DiskArray(DiskArrayTy(tuple(shp), dtype_from_code(code)), h), path)


def write_chunked(x: DiskArray, *, chunk_shape, codecs, paths) -> list[int]:
    """Writes every chunk of `x` encoded, streaming within the memory budget.

    Args:
      x: any DiskArray.
      chunk_shape: the chunk grid's chunk shape (edge chunks are written full
        size, padded with zeros).
      codecs: the encoding pipeline in the order applied: ``("zstd", level)``,
        ``("gzip", level)``, ``("zlib", level)``, ``("deflate", level)``,
        ``("blosc", clevel | shuffle << 8 | cname << 16)`` (cname 0 blosclz, 1
        lz4, 2 lz4hc, 3 zlib, 4 zstd), ``("shuffle", itemsize)``,
        ``("crc32c", 0)``, ``("byteswap", itemsize)``, ``("order_f", 0)``.
      paths: one path (or None: skip the chunk) per chunk of the grid in C
        order; each file is created or truncated, its folder must exist.

    Returns:
      The stored size of each chunk (0 for a skipped one). Every file is
      flushed to disk (fdatasync) before it returns.
    """
    if not isinstance(x, DiskArray):
        raise TypeError(f"write_chunked expects a DiskArray, got {type(x).__name__}")
    what = "write_chunked"
    chunk_shape = _chunk_shape(x.shape, chunk_shape, what)
    check_sizes(x.shape, chunk_shape, np.dtype(x.dtype), what)
    steps = _codec_list(codecs, what, ENCODERS)
    paths = [None if p is None else os.fspath(p) for p in paths]
    n_chunks = math.prod(chunk_grid(x.shape, chunk_shape))
    if len(paths) != n_chunks:
        raise ValueError(
            f"{what}: {len(paths)} paths for a grid of {chunk_grid(x.shape, chunk_shape)} "
            f"({n_chunks} chunks)"
        )
    return _progress.settled(_engine.write_chunked)(x.handle, list(chunk_shape), steps, paths)


def crc32c(data: bytes, value: int = 0) -> int:
    """CRC32C (Castagnoli) of `data`, continuing from `value`, as zarr v3's crc32c codec.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    return _engine.crc32c(bytes(data), value)
