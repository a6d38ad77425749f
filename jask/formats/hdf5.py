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

from .._api.creation import full
from .._api.io import from_numpy, open_array
from .._dtypes import SUPPORTED, storage_dtype
from .._jax.diskarray import DiskArray
from ._chunked import chunk_grid, open_chunked

# HDF5 filter ids (H5Zpublic.h) -> the engine's decoding step.
_DEFLATE, _SHUFFLE, _FLETCHER32 = 1, 2, 3
_FILTER_NAMES = {4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf", 32001: "blosc"}


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
      per stored chunk).
    - contiguous but never written (no storage allocated): a new array of the
      dataset's fill value (a scratch file, not the HDF5 file).
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
      KeyError: no object of that name; TypeError: a group, or a dtype Jask does not store.
      NotImplementedError: a filter other than deflate, shuffle and fletcher32, a
        virtual dataset, external storage, or chunks stored with a filter skipped.
      ValueError: mode="r+" on a dataset that cannot be written in place; a truncated or
        corrupt file, or offsets past its end.

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
    try:
        file = h5py.File(path, "r")
    except (FileNotFoundError, PermissionError, BlockingIOError):
        raise
    except OSError as e:  # libhdf5's "truncated file", "file signature not found", ...
        raise ValueError(f"{path}: not a readable HDF5 file ({e})") from None
    with file as f:
        obj = f.get(dataset)
        if obj is None:
            raise KeyError(f"{path}: no dataset named {dataset!r}")
        if not isinstance(obj, h5py.Dataset):
            raise TypeError(f"{path}: {dataset!r} is a {type(obj).__name__}, not a dataset")
        opener = _plan(h5py, path, dataset, obj, mode, os.path.getsize(path))
    try:
        return opener()  # after h5py's handle is closed: it holds HDF5's own lock on the file
    except BlockingIOError as e:
        raise BlockingIOError(
            e.errno,
            f"{e.strerror}. HDF5 locks the files it opens too: close every h5py.File of "
            f"{path} (in this process as well) before opening {dataset!r} with mode='r+'",
        ) from None


def _plan(h5py, path: str, name: str, ds, mode: str, file_size: int):
    """A function opening the dataset, from its metadata (read while h5py has the file open)."""
    where = f"{path}: dataset {name!r}"
    shape, big_endian, dtype = tuple(ds.shape), *_dtype(ds, where)
    plist = ds.id.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.VIRTUAL:
        raise NotImplementedError(f"{where} is a virtual dataset; Jask opens stored datasets")
    if plist.get_external_count() > 0:
        raise NotImplementedError(f"{where} keeps its data in external files")
    read_only = layout != h5py.h5d.CONTIGUOUS or big_endian or ds.id.get_offset() is None
    if mode == "r+" and read_only:
        raise ValueError(f"{where} cannot be opened with mode='r+': {_why_read_only(ds, h5py)}")
    fill = ds.fillvalue.item() if ds.fillvalue is not None else 0
    if math.prod(shape) == 0 or (layout == h5py.h5d.CONTIGUOUS and ds.id.get_offset() is None):
        return lambda: full(shape, fill, dtype)  # never written (or empty): all fill value
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
        chunks = np.array([[0, offset, math.prod(shape) * dtype.itemsize]], dtype=np.int64)
        codecs = [("byteswap", dtype.itemsize)]
    else:
        chunk_shape = tuple(ds.chunks)
        codecs = _decoders(plist, where, dtype.itemsize)
        if big_endian:
            codecs.append(("byteswap", dtype.itemsize))
        chunks = _chunk_table(ds, where, shape, chunk_shape)

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


def _dtype(ds, where: str) -> tuple[bool, np.dtype]:
    """Whether the dataset is big-endian, and its dtype as Jask stores it."""
    dt = ds.dtype
    big_endian = dt.byteorder == ">" and dt.itemsize > 1
    try:
        return big_endian, storage_dtype(dt.newbyteorder("<") if big_endian else dt)
    except TypeError:
        raise TypeError(
            f"{where} has dtype {dt} (shape {ds.shape}); Jask stores {', '.join(SUPPORTED)}"
        ) from None


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
            raise NotImplementedError(
                f"{where} uses the HDF5 filter {label!r} (id {code}); Jask decodes deflate "
                "(gzip), shuffle and fletcher32: rewrite it with h5py using those"
            )
    return steps[::-1]


def _chunk_table(ds, where: str, shape: tuple, chunk_shape: tuple) -> np.ndarray:
    """(file_index, offset, nbytes) of every chunk of the grid in C order; (-1, 0, 0): not stored."""
    grid = chunk_grid(shape, chunk_shape)
    starts, offsets, sizes, masks = [], [], [], []

    def visit(info):
        starts.append(info.chunk_offset)
        offsets.append(info.byte_offset)
        sizes.append(info.size)
        masks.append(info.filter_mask)

    if hasattr(ds.id, "chunk_iter"):  # HDF5 >= 1.12.3: one pass over the index
        ds.id.chunk_iter(visit)
    else:
        for i in range(ds.id.get_num_chunks()):
            visit(ds.id.get_chunk_info(i))
    table = np.zeros((math.prod(grid), 3), dtype=np.int64)
    table[:, 0] = -1
    if not starts:
        return table
    bad = [i for i, m in enumerate(masks) if m != 0]
    if bad:
        raise NotImplementedError(
            f"{where}: the chunk at {tuple(starts[bad[0]])} was stored with filters skipped "
            f"(filter mask {masks[bad[0]]:#x}); Jask reads chunks that went through every filter"
        )
    coords = np.asarray(starts, dtype=np.int64) // np.asarray(chunk_shape, dtype=np.int64)
    inside = np.all(coords < np.asarray(grid), axis=1)  # a shrunk dataset keeps outer chunks
    index = np.ravel_multi_index(tuple(coords[inside].T), grid)
    table[index, 0] = 0
    table[index, 1] = np.asarray(offsets, dtype=np.int64)[inside]
    table[index, 2] = np.asarray(sizes, dtype=np.int64)[inside]
    return table
