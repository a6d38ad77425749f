"""NumPy .npz archives: stored members opened in place, deflated members streamed read-only.

An .npz is a zip of .npy files. zipfile reads the central directory (zip64
included); where each member's bytes start is read from its own local file
header, since the central directory does not say (the local header's extra
field may differ from the central one's). A stored member is a .npy file at a
known offset: its data are opened as a raw array there. A deflated member
(np.savez_compressed) is one chunk for the engine: the member's compressed
bytes, inflated as a stream with the .npy header skipped.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npy_format

from .._api.creation import zeros
from .._api.io import open_array
from .._dtypes import SUPPORTED, storage_dtype
from .._jax.diskarray import DiskArray
from ._chunked import open_chunked

# signature, version, flags, method, time, date, crc32, sizes, name and extra lengths.
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
# numpy.load's max_header_size, and the limit of Jask's own .npy reader.
_MAX_NPY_HEADER = 10_000
_MAX_NPY_PREFIX = 12 + _MAX_NPY_HEADER  # magic, version, length, header text

_R_PLUS_REFUSED = (
    "mode='r+' is not supported for .npz archives: a zip stores each member's CRC-32 (in its "
    "local header and in the central directory), which update_ would leave stale, and "
    "numpy.load and zipfile check it (zipfile.BadZipFile: Bad CRC-32). Open it with mode='r', "
    "or extract the member to a .npy file and open that with mode='r+'"
)


@dataclass(frozen=True)
class _Member:
    """Where a member's array lives, and how it is stored."""

    shape: tuple[int, ...]
    dtype: np.dtype  # little-endian
    big_endian: bool  # the stored elements are
    deflated: bool
    data_offset: int  # stored: the first element; deflated: the first compressed byte
    stored_size: int  # stored: the data bytes; deflated: the compressed bytes
    header_len: int  # the .npy header's length (skipped after inflating)


def open_npz(path, *, mode: str = "r", members: Iterable[str] | None = None) -> dict:
    """Opens the arrays of a NumPy .npz archive (np.savez / np.savez_compressed) as DiskArrays.

    Stored members (np.savez) are opened in place: no copy, reads go straight
    to their bytes in the archive, at the speed of a .npy file. Deflated
    members (np.savez_compressed) are read-only and streamed: every read of
    the array inflates the member from its start, within the memory budget,
    at about the speed of one core's zlib (each pass over the array pays it
    again; `jask.DiskArray.from_numpy` or an op's output makes a copy that does
    not). Big-endian members are read-only, byte-swapped as they are read.
    Member dtypes must be ones Jask stores, in C order (1-D members always are).

    Args:
      path: the .npz file.
      mode: "r" (default). "r+" is refused: update_ would leave the zip's
        CRC-32 of the member stale, and numpy.load checks it.
      members: the names to open (without ".npy"); default every member.
        A member of a dtype Jask does not store (int64, uint8, object, ...)
        raises TypeError; open the others by naming them here.

    Returns:
      A dict from member name (without ".npy", as numpy.load names them) to
      DiskArray, in archive order.

    Raises:
      ValueError: a truncated or inconsistent archive or member (naming it).
      TypeError: a member's dtype is not one Jask stores.
      NotImplementedError: a Fortran-order, encrypted, or not stored/deflated member.

    >>> import numpy as np, jask, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npz")
    >>> np.savez(p, w=np.ones((2, 3), np.float32), b=np.zeros(3, np.float32))
    >>> {k: v.shape for k, v in jask.open_npz(p).items()}
    {'w': (2, 3), 'b': (3,)}
    """
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
    path = os.fspath(path)
    if mode == "r+":
        raise ValueError(f"jask.open_npz({path!r}): {_R_PLUS_REFUSED}")
    layouts = _read_layouts(path, None if members is None else list(members))
    return {name: _open_member(path, info, m) for name, (info, m) in layouts.items()}


def _read_layouts(path: str, wanted: list[str] | None) -> dict:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            zf = zipfile.ZipFile(f)
        except zipfile.BadZipFile as e:
            raise ValueError(f"{path}: not a readable .npz (zip) archive: {e}") from None
        with zf:
            infos = {_member_name(i.filename): i for i in zf.infolist() if not i.is_dir()}
        if wanted is not None:
            missing = [n for n in wanted if n not in infos]
            if missing:
                raise ValueError(
                    f"{path}: no member named {', '.join(map(repr, missing))}; "
                    f"the archive holds {', '.join(map(repr, infos)) or 'nothing'}"
                )
            infos = {n: infos[n] for n in wanted}
        return {name: (info, _layout(f, size, path, info)) for name, info in infos.items()}


def _member_name(filename: str) -> str:
    return filename[: -len(".npy")] if filename.endswith(".npy") else filename


def _layout(f, file_size: int, path: str, info: zipfile.ZipInfo) -> _Member:
    where = f"{path}: member {info.filename!r}"
    if info.flag_bits & 0x1:
        raise NotImplementedError(f"{where} is encrypted; Jask reads unencrypted archives")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise NotImplementedError(
            f"{where} is compressed with zip method {info.compress_type}; Jask reads stored "
            "(np.savez) and deflated (np.savez_compressed) members"
        )
    start = _data_start(f, file_size, where, info.header_offset)
    if start + info.compress_size > file_size:
        raise ValueError(
            f"{where}: its {info.compress_size} bytes at offset {start} run past the end of the "
            f"file ({file_size} bytes); the archive is truncated"
        )
    deflated = info.compress_type == zipfile.ZIP_DEFLATED
    if not deflated and info.compress_size != info.file_size:
        raise ValueError(
            f"{where} is stored uncompressed, but the archive gives it {info.compress_size} "
            f"stored and {info.file_size} uncompressed bytes; the archive is corrupt"
        )
    if deflated:
        prefix = _inflate_prefix(f, start, info.compress_size, where)
    else:
        f.seek(start)
        prefix = f.read(min(info.compress_size, _MAX_NPY_PREFIX))
    shape, dtype, header_len, big_endian = _parse_npy_prefix(prefix, where)
    nbytes = math.prod(shape) * dtype.itemsize
    if info.file_size != header_len + nbytes:
        raise ValueError(
            f"{where}: its .npy header says shape {shape} {dtype} ({nbytes} bytes after a "
            f"{header_len}-byte header), but the member holds {info.file_size - header_len} "
            "bytes after its header"
        )
    if deflated:
        return _Member(shape, dtype, big_endian, True, start, info.compress_size, header_len)
    return _Member(shape, dtype, big_endian, False, start + header_len, nbytes, header_len)


def _data_start(f, file_size: int, where: str, header_offset: int) -> int:
    """The offset of a member's first byte, from its local file header."""
    if header_offset + _LOCAL_HEADER.size > file_size:
        raise ValueError(
            f"{where}: its local header at offset {header_offset} is beyond the end of the "
            f"file ({file_size} bytes); the archive is truncated"
        )
    f.seek(header_offset)
    signature, *_, name_len, extra_len = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
    if signature != _LOCAL_SIGNATURE:
        raise ValueError(
            f"{where}: no local file header at offset {header_offset} (the central directory "
            "points elsewhere than a member); the archive is corrupt"
        )
    return header_offset + _LOCAL_HEADER.size + name_len + extra_len


def _inflate_prefix(f, start: int, compressed_size: int, where: str) -> bytes:
    """The first bytes (at most a whole .npy header's) of a deflated member, inflated."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as zip method 8 stores it
    out = b""
    read = 0
    while len(out) < _MAX_NPY_PREFIX and read < compressed_size and not inflater.eof:
        f.seek(start + read)
        piece = f.read(min(4096, compressed_size - read))
        read += len(piece)
        try:
            out += inflater.decompress(piece, _MAX_NPY_PREFIX - len(out))
        except zlib.error as e:
            raise ValueError(f"{where}: corrupt deflate stream ({e})") from None
    return out


def _parse_npy_prefix(prefix: bytes, where: str) -> tuple[tuple[int, ...], np.dtype, int, bool]:
    """Shape, dtype (little-endian), header length and whether the data are big-endian, from
    the first bytes of a .npy file, checked for Jask."""
    fp = io.BytesIO(prefix)
    try:
        version = npy_format.read_magic(fp)
        if version == (1, 0):
            header = npy_format.read_array_header_1_0(fp, max_header_size=_MAX_NPY_HEADER)
        elif version in ((2, 0), (3, 0)):
            header = npy_format.read_array_header_2_0(fp, max_header_size=_MAX_NPY_HEADER)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except ValueError as e:
        raise ValueError(f"{where} is not a readable .npy file: {e}") from None
    shape, fortran_order, dtype = header
    if dtype.hasobject:
        raise TypeError(
            f"{where} holds Python objects (dtype {dtype}, saved with pickle); Jask opens "
            f"arrays of {', '.join(SUPPORTED)}"
        )
    big_endian = dtype.byteorder == ">" and dtype.itemsize > 1
    try:
        dtype = storage_dtype(dtype.newbyteorder("<") if big_endian else dtype)
    except TypeError:
        raise TypeError(
            f"{where} has dtype {dtype} (shape {shape}); Jask stores {', '.join(SUPPORTED)}: "
            "convert it, or pass members= to open the others"
        ) from None
    if fortran_order and sum(d > 1 for d in shape) > 1:
        raise NotImplementedError(
            f"{where} is stored in Fortran order (shape {shape}, {dtype}); Jask opens C-order "
            "arrays: save it with np.ascontiguousarray(a)"
        )
    return tuple(shape), dtype, fp.tell(), big_endian


def _open_member(path: str, info: zipfile.ZipInfo, m: _Member) -> DiskArray:
    if math.prod(m.shape) == 0:
        return zeros(m.shape, m.dtype)  # no elements: nothing to read
    if not m.deflated and not m.big_endian:
        return open_array(path, shape=m.shape, dtype=m.dtype, offset=m.data_offset, mode="r")
    # One chunk, the whole member: the engine inflates one deflate stream as it reads (never
    # the whole member in memory), and reads byte-swap-only chunks in runs, in place.
    codecs = [("deflate", 0), ("skip", m.header_len)] if m.deflated else []
    if m.big_endian:
        codecs.append(("byteswap", m.dtype.itemsize))
    return open_chunked(
        path,
        dtype=m.dtype,
        shape=m.shape,
        chunk_shape=m.shape,
        codecs=codecs,
        files=[path],
        chunks=np.array([[0, m.data_offset, m.stored_size]], dtype=np.int64),
        name=info.filename,
    )
