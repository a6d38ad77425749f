"""HDF5 datasets: contiguous ones opened in place, chunked or filtered ones streamed read-only.

h5py reads the file's metadata once, at open: the layout, the dtype, the
filter pipeline and, for a chunked dataset, the offset and size of every
stored chunk. Then h5py's handle is closed and the engine reads the dataset's
bytes itself: a contiguous dataset as a raw array at its offset, a chunked one
through the chunked reader (jask/formats/_chunked.py), which decodes chunks
with the filters mapped below. libhdf5 is never called per block.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .._api.io import from_numpy, open_array
from .._dtypes import SUPPORTED, storage_dtype
from .._files import NotInFileError, UnsupportedFileError, open_regular
from .._jax.diskarray import DiskArray
from ._chunked import chunk_grid, open_chunked

# HDF5 filter ids (H5Zpublic.h) -> the engine's decoding step.
_DEFLATE, _SHUFFLE, _FLETCHER32 = 1, 2, 3
_FILTER_NAMES = {4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf", 32001: "blosc"}
_MAX_BYTES = 1 << 62  # a dataset's bytes (zero-length axes counted as 1), at most


def open_hdf5(path, dataset: str, *, mode: str = "r") -> DiskArray:
    """Opens one dataset of an HDF5 file as a DiskArray (needs h5py).

    What each layout costs:

    - contiguous, unfiltered, little-endian: in place, at the speed of a raw
      file; mode="r+" allowed (see below).
    - contiguous big-endian: read-only, in place, byte-swapped as it is read.
    - chunked and/or filtered (gzip, shuffle, fletcher32): read-only,
      streamed chunk by chunk within the memory budget; every read
      of the array reads and decodes its chunks again (gzip at one core's
      zlib speed: the engine decodes on one thread). Chunks never written read as the
      fill value. The open reads the chunk index through h5py (a Python call
      per stored chunk) and keeps a row per stored chunk, however large the grid.
    - never written (contiguous with no storage allocated, or chunked with no
      chunk stored): the dataset's fill value, read from nowhere (no file written).
    - compact (data inside the object header, at most 64 KB): copied into a
      scratch array at open.

    mode="r+" (contiguous datasets only): `update_` writes the new values to
    a copy of the whole file beside it and renames it over the path, so the
    rest of the file is kept byte for byte. HDF5 locks files too (flock,
    HDF5 >= 1.10): while an h5py File of the path is open in any process,
    the r+ open raises BlockingIOError; while the writable DiskArray lives,
    h5py.File(path) fails unless opened with locking=False (or
    HDF5_USE_FILE_LOCKING=FALSE). An h5py writer in another process that has
    not flushed may leave stale bytes on disk, for both modes.

    Args:
      path: the HDF5 file.
      dataset: the dataset's path in the file, e.g. "group/data".
      mode: "r" (default) or "r+".

    Returns:
      A DiskArray of the dataset's shape and dtype (little-endian).

    Raises:
      ImportError: h5py is not installed.
      NotInFileError (a KeyError and ValueError): no object of that name.
      TypeError: a group, or a dtype Jask does not store.
      UnsupportedFileError (a NotImplementedError and ValueError): an external link on the
        dataset's path, a filter other than deflate, shuffle and fletcher32, a virtual
        dataset, external storage, chunks stored with a filter skipped, or a datatype whose
        bits h5py converts (a float that is not IEEE binary16/32/64, an integer with padding
        bits): Jask reads bytes as they are.
      ValueError: mode="r+" on a dataset that cannot be written in place; a truncated or
        corrupt file, offsets past its end; more than 16 soft links on the dataset's path.
      OSError: the path is not a regular file (a FIFO, a device), or cannot be read.

    >>> import numpy as np, jask, tempfile, os, h5py
    >>> p = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(p, "w") as f: _ = f.create_dataset("x", data=np.ones((2, 3), np.float32))
    >>> jask.open_hdf5(p, "x").shape
    (2, 3)
    """
    try:
        import h5py
    except ImportError:
        raise ImportError("jask.open_hdf5 needs h5py: pip install h5py") from None
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
    path = os.fspath(path)
    where = f"{path}: dataset {dataset!r}"
    # Refused unless a regular file, before libhdf5 reads it; h5py then opens this descriptor's
    # file (not the path again, which may have changed in between).
    fd = open_regular(path, "HDF5 file")
    try:
        file_size = os.fstat(fd).st_size
        file = _h5py_open(h5py, path, fd)
        try:
            with file as f:
                opener = _plan(h5py, path, dataset, f, mode, file_size)
        except Exception as e:  # libhdf5 on corrupt metadata: OSError, RuntimeError, ...
            if isinstance(e, _OWN) and str(e).startswith(path):
                raise  # a refusal of Jask's own, naming the file
            raise ValueError(
                f"{where}: unreadable HDF5 metadata ({type(e).__name__}: {e})"
            ) from None
    finally:
        os.close(fd)
    try:
        return opener()  # after h5py's handle is closed: it holds HDF5's own lock on the file
    except BlockingIOError as e:
        raise BlockingIOError(
            e.errno,
            f"{e.strerror}. HDF5 locks the files it opens too: close every h5py.File of "
            f"{path} (in this process as well) before opening {dataset!r} with mode='r+'",
        ) from None


# Jask's own refusals (their messages start with the path), raised while h5py has the file
# open: passed through as they are; h5py's own errors are not.
_OWN = (ValueError, TypeError, OSError, KeyError)


def _h5py_open(h5py, path: str, fd: int):
    fd_path = f"/proc/self/fd/{fd}"
    try:
        return h5py.File(fd_path if os.path.exists(fd_path) else path, "r")
    except (PermissionError, BlockingIOError) as e:
        raise type(e)(e.errno, f"{path}: {e}") from None
    except Exception as e:  # libhdf5's "truncated file", "file signature not found", ...
        raise ValueError(f"{path}: not a readable HDF5 file ({e})") from None


def _plan(h5py, path: str, name: str, f, mode: str, file_size: int):
    """A function opening the dataset, from its metadata (read while h5py has the file open)."""
    where = f"{path}: dataset {name!r}"
    hard_path = _path_in_file(h5py, f, path, name)
    try:
        ds = f.get(hard_path)
    except (KeyError, ValueError):
        ds = None
    if ds is None:
        raise NotInFileError(f"{path}: no dataset named {name!r}")
    if not isinstance(ds, h5py.Dataset):
        raise TypeError(f"{path}: {name!r} is a {type(ds).__name__}, not a dataset")
    shape, big_endian, dtype = tuple(ds.shape), *_dtype(h5py, ds, where)
    if math.prod(max(d, 1) for d in shape) * dtype.itemsize > _MAX_BYTES:
        raise ValueError(f"{where}: its shape {shape} {dtype} is too large for Jask")
    plist = ds.id.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.VIRTUAL:
        raise UnsupportedFileError(f"{where} is a virtual dataset; Jask opens stored datasets")
    if plist.get_external_count() > 0:
        raise UnsupportedFileError(f"{where} keeps its data in external files")
    read_only = layout != h5py.h5d.CONTIGUOUS or big_endian or ds.id.get_offset() is None
    if mode == "r+" and read_only:
        raise ValueError(f"{where} cannot be opened with mode='r+': {_why_read_only(ds, h5py)}")
    fill = ds.fillvalue.item() if ds.fillvalue is not None else 0
    if math.prod(shape) == 0:
        return lambda: _all_fill(path, name, shape, dtype, fill)  # no elements
    if layout == h5py.h5d.CONTIGUOUS and ds.id.get_offset() is None:
        return lambda: _all_fill(path, name, shape, dtype, fill)  # never written
    if layout == h5py.h5d.COMPACT:
        data = np.ascontiguousarray(ds[()]).astype(dtype)  # tiny: inside the object header
        return lambda: from_numpy(data)
    if layout == h5py.h5d.CONTIGUOUS:
        offset = ds.id.get_offset()
        _check_extent(where, offset, math.prod(shape) * dtype.itemsize, file_size)
        if not big_endian:
            return lambda: open_array(path, shape=shape, dtype=dtype, offset=offset, mode=mode)
        # One chunk, the whole dataset: the engine reads byte-swap-only chunks in runs, in place.
        chunk_shape = shape
        chunks = np.array([[0, 0, offset, math.prod(shape) * dtype.itemsize]], dtype=np.int64)
        codecs = [("byteswap", dtype.itemsize)]
    else:
        chunk_shape = tuple(ds.chunks)
        codecs = _decoders(plist, where, dtype.itemsize)
        if big_endian:
            codecs.append(("byteswap", dtype.itemsize))
        chunks = _stored_chunks(ds, where, shape, chunk_shape, file_size)
        if len(chunks) == 0:
            return lambda: _all_fill(path, name, shape, dtype, fill)  # no chunk ever written

    def open_streamed():
        return open_chunked(
            path,
            dtype=dtype,
            shape=shape,
            chunk_shape=chunk_shape,
            codecs=codecs,
            files=[path],
            chunks=chunks,
            fill_value=fill,
            name=name,
        )

    return open_streamed


_MAX_SOFT_LINKS = 16  # libhdf5's default (H5Pset_nlinks)


def _path_in_file(h5py, f, path: str, name: str) -> str:
    """`name` as a path of hard links, its soft links resolved here: an external link is refused
    before libhdf5 follows it (it would open another file, a FIFO included, and the dataset's
    offsets would be that file's)."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        return name
    here: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        try:
            link = f.get("/" + "/".join([*here, part]), getlink=True)
        except (KeyError, ValueError, TypeError):
            link = None
        if isinstance(link, h5py.SoftLink):
            hops += 1
            if hops > _MAX_SOFT_LINKS:
                raise ValueError(
                    f"{path}: dataset {name!r} goes through more than {_MAX_SOFT_LINKS} soft "
                    "links (a cycle?)"
                )
            here = [] if link.path.startswith("/") else here
            parts = [p for p in link.path.split("/") if p not in ("", ".")] + parts
        elif isinstance(link, h5py.HardLink):
            here.append(part)
        elif link is None:
            raise NotInFileError(f"{path}: no dataset named {name!r}")
        else:
            target = getattr(link, "filename", "?")
            raise UnsupportedFileError(
                f"{path}: dataset {name!r} leads through {type(link).__name__} "
                f"{'/'.join([*here, part])!r} (to file {target!r}); Jask opens datasets stored "
                "in the file it is given"
            )
    return "/" + "/".join(here)


def _all_fill(path: str, name: str, shape: tuple, dtype: np.dtype, fill) -> DiskArray:
    """The dataset's fill value everywhere, written nowhere: one chunk, the whole array, not
    stored (a dataset of terabytes that was never written costs nothing until it is read);
    no elements: no chunk."""
    empty = math.prod(shape) == 0
    return open_chunked(
        path,
        dtype=dtype,
        shape=shape,
        chunk_shape=tuple(max(d, 1) for d in shape),
        codecs=[],
        files=[] if empty else [path],
        chunks=np.array([] if empty else [[-1, 0, 0]], dtype=np.int64).reshape(-1, 3),
        fill_value=fill,
        name=name,
    )


def _dtype(h5py, ds, where: str) -> tuple[bool, np.dtype]:
    """Whether the dataset is big-endian, and its dtype as Jask stores it."""
    dt = ds.dtype
    big_endian = dt.byteorder == ">" and dt.itemsize > 1
    try:
        stored = storage_dtype(dt.newbyteorder("<") if big_endian else dt)
    except TypeError:
        raise TypeError(
            f"{where} has dtype {dt} (shape {ds.shape}); Jask stores {', '.join(SUPPORTED)}"
        ) from None
    if stored.kind == "c":  # an HDF5 compound of two floats, which h5py reads as complex
        raise TypeError(
            f"{where} has dtype {dt} (an HDF5 compound datatype); Jask reads complex values "
            "from .npy, raw, npz, Zarr and safetensors files, not HDF5"
        )
    _check_bit_layout(h5py, ds.id.get_type(), where, stored)
    return big_endian, stored


# IEEE binary16/32/64 by size: (sign, exponent position, exponent bits, mantissa position,
# mantissa bits), and the exponent bias.
_IEEE_FLOATS = {
    2: ((15, 10, 5, 0, 10), 15),
    4: ((31, 23, 8, 0, 23), 127),
    8: ((63, 52, 11, 0, 52), 1023),
}


def _check_bit_layout(h5py, tid, where: str, dtype: np.dtype) -> None:
    """Refuses a datatype whose bits h5py converts (so reading its bytes as `dtype` would be
    wrong): a float that is not IEEE, an integer with padding bits, a byte order not LE/BE."""
    h5t = h5py.h5t
    if tid.get_class() == h5t.ENUM:  # h5py's bool: an enum over an integer
        tid = tid.get_super()
    size, bits = tid.get_size(), 8 * tid.get_size()
    problems = []
    if size > 1 and tid.get_order() not in (h5t.ORDER_LE, h5t.ORDER_BE):
        problems.append(f"byte order {tid.get_order()} (neither little- nor big-endian)")
    if tid.get_precision() != bits or tid.get_offset() != 0:
        problems.append(
            f"{tid.get_precision()} significant bits at bit {tid.get_offset()} of its {bits}"
        )
    if tid.get_class() == h5t.FLOAT:
        fields, bias = tid.get_fields(), tid.get_ebias()
        if (fields, bias) != _IEEE_FLOATS.get(size) or tid.get_norm() != h5t.NORM_IMPLIED:
            sign, epos, esize, mpos, msize = fields
            problems.append(
                f"sign bit {sign}, a {esize}-bit exponent at bit {epos} (bias {bias}) and a "
                f"{msize}-bit mantissa at bit {mpos} (normalization {tid.get_norm()}): not "
                f"IEEE binary{bits}"
            )
    if problems:
        raise UnsupportedFileError(
            f"{where} has an HDF5 datatype of {size} bytes with {'; '.join(problems)}. h5py "
            f"converts it to {dtype}; Jask reads the stored bytes as they are, so it refuses "
            "it: convert the dataset with h5py (ds[...].astype) and save that"
        )


def _why_read_only(ds, h5py) -> str:
    layout = ds.id.get_create_plist().get_layout()
    if layout == h5py.h5d.CHUNKED:
        return "it is chunked (chunks are read-only, streamed); write it with h5py"
    if layout == h5py.h5d.COMPACT:
        return "it is compact (its data live in the object header and are copied at open)"
    if ds.id.get_offset() is None:
        return "it has no storage yet (never written); write it with h5py first"
    return f"it is big-endian ({ds.dtype.str}), read through a byte swap"


def _check_extent(where: str, offset: int, nbytes: int, file_size: int) -> None:
    if offset + nbytes > file_size:
        raise ValueError(
            f"{where}: its {nbytes} bytes at offset {offset} run past the end of the file "
            f"({file_size} bytes); the file is truncated"
        )


def _decoders(plist, where: str, itemsize: int) -> list[tuple[str, int]]:
    """The engine's decoding pipeline: HDF5's filter pipeline (applied on write) reversed."""
    steps = []
    for i in range(plist.get_nfilters()):
        code, _flags, _values, filter_name = plist.get_filter(i)
        if code == _DEFLATE:
            steps.append(("zlib", 0))
        elif code == _SHUFFLE:
            steps.append(("shuffle", itemsize))
        elif code == _FLETCHER32:
            steps.append(("fletcher32", 0))
        else:
            label = filter_name.decode(errors="replace") or _FILTER_NAMES.get(code, "unknown")
            raise UnsupportedFileError(
                f"{where} uses the HDF5 filter {label!r} (id {code}); Jask decodes deflate "
                "(gzip), shuffle and fletcher32: rewrite it with h5py using those"
            )
    return steps[::-1]


def _stored_chunks(ds, where: str, shape: tuple, chunk_shape: tuple, file_size: int) -> np.ndarray:
    """The engine's sparse chunk table: (chunk id, file index 0, offset, nbytes) of each stored
    chunk inside the grid, by chunk id, checked against the file; as many rows as chunks the
    file stores, however large the grid (chunks not listed read as the fill value)."""
    grid = chunk_grid(shape, chunk_shape)
    rows = []

    def visit(info):
        if info.byte_offset is None:  # HDF5's undefined address: not allocated
            return
        start = tuple(info.chunk_offset)
        if info.filter_mask != 0:
            raise UnsupportedFileError(
                f"{where}: the chunk at {start} was stored with filters skipped (filter mask "
                f"{info.filter_mask:#x}); Jask reads chunks that went through every filter"
            )
        if len(start) != len(shape) or any(o % c for o, c in zip(start, chunk_shape)):
            raise ValueError(f"{where}: a chunk at {start} is not on the chunk grid {chunk_shape}")
        coords = [o // c for o, c in zip(start, chunk_shape)]
        if any(k >= g for k, g in zip(coords, grid)):
            return  # a shrunk dataset keeps the chunks outside its shape
        offset, size = info.byte_offset, info.size
        if not (0 <= offset and 0 < size and offset + size <= file_size):
            raise ValueError(
                f"{where}: the chunk at {start} claims {size} bytes at offset {offset}, outside "
                f"the file ({file_size} bytes); the file is truncated or corrupt"
            )
        rows.append((_ravel(coords, grid), 0, offset, size))

    if hasattr(ds.id, "chunk_iter"):  # HDF5 >= 1.12.3: one pass over the index
        ds.id.chunk_iter(visit)
    else:
        for i in range(ds.id.get_num_chunks()):
            visit(ds.id.get_chunk_info(i))
    table = np.array(sorted(rows), dtype=np.int64).reshape(-1, 4)
    if len(table) > 1 and np.any(table[1:, 0] == table[:-1, 0]):
        raise ValueError(f"{where}: its chunk index lists a chunk twice; the file is corrupt")
    return table


def _ravel(coords: list[int], grid: tuple) -> int:
    index = 0
    for k, g in zip(coords, grid):
        index = index * g + k
    return index
