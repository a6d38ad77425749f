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

import errno
import io
import itertools
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .._api.io import open_array
from .._dtypes import SUPPORTED, storage_dtype
from .._files import UnsupportedFileError, open_regular
from .._jax.diskarray import DiskArray
from .._runtime import memory_budget
from ._chunked import open_chunked
from ._npy import MAX_HEADER, read_header

# signature, version, flags, method, time, date, crc32, sizes, name and extra lengths.
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
# numpy.load's max_header_size, and the limit of Jask's own .npy reader.
_MAX_NPY_PREFIX = 12 + MAX_HEADER  # magic, version, length, header text
_ENCRYPTED_OR_PATCHED = 0x61  # general purpose flags: encrypted, patched, strongly encrypted
_UTF8_NAME = 0x800  # general purpose flag: the name is UTF-8 (else cp437)
_MAX_DEFLATE_RATIO = 1032  # deflate writes at least one bit per 258 bytes of output
_MAX_ELEMENTS = 1 << 60  # a shape's elements (zero-length axes counted as 1), at most
# CRC-32 verification reads this many bytes at a time (an eighth of the budget, within these).
_MIN_VERIFY_BLOCK, _MAX_VERIFY_BLOCK = 64 << 10, 16 << 20
# The longest central directory Jask reads (zipfile reads it whole): a million members at
# 100 bytes each fit.
_MAX_CENTRAL_DIRECTORY = 256 << 20

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

    The open checks each opened member's CRC-32 over all its bytes, as numpy.load
    does, so that a corrupt member is an error and never wrong values: a read
    of a stored member's bytes, an inflate of a deflated one's (once per file:
    opening the same unchanged file again skips it). Only regular files are
    opened (a FIFO or a device is refused before it is read).

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
      ValueError: a truncated, inconsistent or corrupt archive or member (a bad CRC-32),
        naming it.
      TypeError: a member's dtype is not one Jask stores.
      UnsupportedFileError (a NotImplementedError and ValueError): a Fortran-order, encrypted,
        or not stored/deflated member.
      OSError: the path is not a regular file (a FIFO, a device), or cannot be read.

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
    with os.fdopen(open_regular(path, ".npz archive"), "rb") as f:
        st = os.fstat(f.fileno())
        infos = _central_directory(f, path)
        if wanted is not None:
            missing = [n for n in wanted if n not in infos]
            if missing:
                raise ValueError(
                    f"{path}: no member named {', '.join(map(repr, missing))}; "
                    f"the archive holds {', '.join(map(repr, infos)) or 'nothing'}"
                )
            infos = {n: infos[n] for n in wanted}
        layouts = {name: (info, _layout(f, st.st_size, path, info)) for name, info in infos.items()}
        for info, m in layouts.values():
            _verify_crc(f, st, path, info, m)
        return layouts


class _CappedReads:
    """The archive as zipfile reads it, each read refused past `limit` bytes: zipfile reads the
    central directory whole, at the size the end record gives (a sparse file can claim any
    size for free: 4 GiB of zeros were read into memory, a zip64 record's more a bare
    MemoryError)."""

    def __init__(self, f, limit: int):
        self._f, self._limit = f, limit

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:  # to the end: only ever its last bytes (the end records)
            data = self._f.read(self._limit + 1)
            if len(data) > self._limit:
                raise ValueError(f"a read to the end of over {self._limit} bytes")
            return data
        if n > self._limit:
            raise ValueError(
                f"its central directory is {n} bytes, over Jask's limit of {self._limit} bytes"
            )
        return self._f.read(n)

    def seek(self, *args) -> int:
        return self._f.seek(*args)

    def tell(self) -> int:
        return self._f.tell()

    def seekable(self) -> bool:
        return True


def _central_directory(f, path: str) -> dict:
    """Member name -> ZipInfo, from the archive's central directory (zipfile's reading of it)."""
    try:
        with zipfile.ZipFile(_CappedReads(f, _MAX_CENTRAL_DIRECTORY)) as zf:
            return {_member_name(i.filename): i for i in zf.infolist() if not i.is_dir()}
    except MemoryError:
        raise
    except OSError as e:
        if e.errno not in (None, errno.EINVAL):  # EINVAL: a seek before the start of the file
            raise type(e)(e.errno, f"{path}: reading the archive failed: {e.strerror}") from None
        raise ValueError(f"{path}: not a readable .npz (zip) archive: {e}") from None
    except Exception as e:  # zipfile raises BadZipFile, struct.error, EOFError, ... on bad bytes
        raise ValueError(
            f"{path}: not a readable .npz (zip) archive: {type(e).__name__}: {e}"
        ) from None


def _member_name(filename: str) -> str:
    return filename[: -len(".npy")] if filename.endswith(".npy") else filename


def _layout(f, file_size: int, path: str, info: zipfile.ZipInfo) -> _Member:
    where = f"{path}: member {info.filename!r}"
    if info.flag_bits & _ENCRYPTED_OR_PATCHED:
        raise UnsupportedFileError(
            f"{where} is encrypted or patched (zip flags {info.flag_bits:#x}); Jask reads "
            "plain archives"
        )
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise UnsupportedFileError(
            f"{where} is compressed with zip method {info.compress_type}; Jask reads stored "
            "(np.savez) and deflated (np.savez_compressed) members"
        )
    start = _data_start(f, file_size, where, info)
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
    if deflated and info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 1024:
        raise ValueError(
            f"{where}: the archive says its {info.compress_size} deflated bytes inflate to "
            f"{info.file_size}, more than deflate can ({_MAX_DEFLATE_RATIO} to 1); the archive "
            "is corrupt"
        )
    if deflated:
        prefix = _inflate_prefix(f, start, info.compress_size, where)
    else:
        prefix = os.pread(f.fileno(), min(info.compress_size, _MAX_NPY_PREFIX), start)
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


def _data_start(f, file_size: int, where: str, info: zipfile.ZipInfo) -> int:
    """The offset of a member's first byte, from its local file header (checked as zipfile
    checks it when numpy.load opens the member)."""
    header_offset = info.header_offset
    if header_offset < 0 or header_offset + _LOCAL_HEADER.size > file_size:
        raise ValueError(
            f"{where}: its local header at offset {header_offset} is outside the file "
            f"({file_size} bytes); the archive is truncated or corrupt"
        )
    header = os.pread(f.fileno(), _LOCAL_HEADER.size, header_offset)
    signature, _, flags, *_, name_len, extra_len = _LOCAL_HEADER.unpack(header)
    if signature != _LOCAL_SIGNATURE:
        raise ValueError(
            f"{where}: no local file header at offset {header_offset} (the central directory "
            "points elsewhere than a member); the archive is corrupt"
        )
    name_at = header_offset + _LOCAL_HEADER.size
    raw_name = os.pread(f.fileno(), name_len, name_at)
    name = raw_name.decode("utf-8" if flags & _UTF8_NAME else "cp437", errors="replace")
    if name != info.orig_filename:
        raise ValueError(f"{where}: its local header names it {name!r}; the archive is corrupt")
    return name_at + name_len + extra_len


def _inflate_prefix(f, start: int, compressed_size: int, where: str) -> bytes:
    """The first bytes (at most a whole .npy header's) of a deflated member, inflated."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as zip method 8 stores it
    out = b""
    read = 0
    while len(out) < _MAX_NPY_PREFIX and read < compressed_size and not inflater.eof:
        piece = os.pread(f.fileno(), min(4096, compressed_size - read), start + read)
        if not piece:
            raise ValueError(f"{where}: the archive ends inside the member (truncated)")
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
    shape, fortran_order, dtype = read_header(fp, where)
    if any(d < 0 for d in shape) or math.prod(max(d, 1) for d in shape) > _MAX_ELEMENTS:
        raise ValueError(f"{where}: its .npy header gives it an impossible shape {shape}")
    if dtype.hasobject:
        raise TypeError(
            f"{where} holds Python objects (dtype {dtype}, saved with pickle); Jask opens "
            f"arrays of {', '.join(SUPPORTED)}"
        )
    big_endian = dtype.byteorder == ">" and dtype.itemsize > 1
    try:
        if big_endian and dtype.kind == "c":  # a byte swap swaps whole items, not the parts
            raise TypeError
        dtype = storage_dtype(dtype.newbyteorder("<") if big_endian else dtype)
    except TypeError:
        raise TypeError(
            f"{where} has dtype {dtype} (shape {shape}); Jask stores {', '.join(SUPPORTED)}: "
            "convert it, or pass members= to open the others"
        ) from None
    if fortran_order and sum(d > 1 for d in shape) > 1:
        raise UnsupportedFileError(
            f"{where} is stored in Fortran order (shape {shape}, {dtype}); Jask opens C-order "
            "arrays: save it with np.ascontiguousarray(a)"
        )
    return tuple(shape), dtype, fp.tell(), big_endian


# The members whose CRC-32 matched, by file identity: (device, inode, size, mtime, ctime,
# the member's local header offset, its CRC-32).
_VERIFIED: set[tuple] = set()


def _verify_crc(f, st: os.stat_result, path: str, info: zipfile.ZipInfo, m: _Member) -> None:
    """Checks the member's CRC-32 over all its bytes (inflated), once per file identity.

    The engine reads a member's bytes at any offset, never all of them in order, so it cannot
    check the CRC itself: this pass, at open, is what makes a corrupt member an error rather
    than wrong values. Stored members cost a read of their bytes; deflated ones an inflate.
    """
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    key += (info.header_offset, info.CRC)
    if key in _VERIFIED:
        return
    where = f"{path}: member {info.filename!r}"
    block = max(_MIN_VERIFY_BLOCK, min(memory_budget() // 8, _MAX_VERIFY_BLOCK))
    start = m.data_offset if m.deflated else m.data_offset - m.header_len
    blocks = _blocks(f.fileno(), start, info.compress_size, block, where)
    crc = _inflated_crc(blocks, info.file_size, block, where) if m.deflated else _crc(blocks)
    if crc != info.CRC:
        raise ValueError(
            f"{where}: its CRC-32 is {crc:#010x}, the archive says {info.CRC:#010x} (Bad "
            "CRC-32, as numpy.load says); the member is corrupt"
        )
    _VERIFIED.add(key)


def _blocks(fd: int, start: int, size: int, block: int, where: str):
    """The bytes [start, start + size) of the file, in blocks of at most `block` bytes."""
    done = 0
    while done < size:
        piece = os.pread(fd, min(block, size - done), start + done)
        if not piece:
            raise ValueError(f"{where}: the archive ends inside the member (truncated)")
        done += len(piece)
        yield piece


def _crc(blocks) -> int:
    crc = 0
    for piece in blocks:
        crc = zlib.crc32(piece, crc)
    return crc


def _inflated_crc(blocks, size: int, block: int, where: str) -> int:
    """The CRC-32 of a raw deflate stream's output, which must be `size` bytes."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    crc = done = 0
    try:
        # A last empty piece drains what zlib still holds once every input byte is in.
        for piece in itertools.chain(blocks, [b""]):
            while not inflater.eof and done <= size:
                out = inflater.decompress(piece, block)
                piece = inflater.unconsumed_tail
                if not out and not piece:
                    break
                done += len(out)
                crc = zlib.crc32(out, crc)
            if inflater.eof or done > size:
                break
    except zlib.error as e:
        raise ValueError(f"{where}: corrupt deflate stream ({e})") from None
    if done != size or not inflater.eof:
        cut = "" if inflater.eof or done > size else " and is cut short"
        raise ValueError(
            f"{where}: its deflate stream inflates to {'more than ' * (done > size)}{done} "
            f"bytes{cut}; the archive says {size}: the member is corrupt"
        )
    return crc


def _open_member(path: str, info: zipfile.ZipInfo, m: _Member) -> DiskArray:
    if math.prod(m.shape) == 0:  # no elements: a grid of no chunks, nothing to read
        return open_chunked(
            path,
            dtype=m.dtype,
            shape=m.shape,
            chunk_shape=tuple(max(d, 1) for d in m.shape),
            codecs=[],
            files=[],
            chunks=np.zeros((0, 3), dtype=np.int64),
            name=info.filename,
        )
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
