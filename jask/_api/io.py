"""Moving arrays between memory and files: from_numpy, open, update_, materialize."""

from __future__ import annotations

import os

import jax
import numpy as np

from .. import _engine, _runtime
from .._dtypes import dtype_code, dtype_from_code, storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import apply, describe
from .._shapes import as_int, as_shape, check_nbytes
from ..ops import FromInMemory, ToInMemory
from .operands import check_disk


def materialize(x) -> jax.Array:
    """Reads a whole DiskArray into an in-memory jax.Array (the explicit bridge).

    >>> import numpy as np, jask
    >>> jask.materialize(jask.DiskArray.from_numpy(np.ones(2, np.float32))).tolist()
    [1.0, 1.0]
    """
    check_disk("materialize", x)
    return apply(ToInMemory, x)


def from_numpy(array) -> DiskArray:
    """Writes an in-memory array to a new scratch DiskArray (see DiskArray.from_numpy)."""
    if isinstance(array, DiskArray):
        raise TypeError("jask.DiskArray.from_numpy: the argument is already a DiskArray")
    if compat.is_tracer(array):
        return apply(FromInMemory, array.astype(storage_dtype(array.dtype)))
    # Concrete data goes straight to the engine: through JAX, float64 would
    # be narrowed when x64 is off.
    arr = np.asarray(array)
    arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # ascontiguousarray makes 0-d 1-d
    dt = storage_dtype(arr.dtype)
    _runtime.ensure_scratch()
    out = DiskArray(DiskArrayTy(arr.shape, dt), _engine.create(dtype_code(dt), list(arr.shape)))
    _engine.write_from(out.handle, arr.reshape(-1).view(np.uint8))
    return out


def open_array(path, *, shape=None, dtype=None, offset=0, mode="r") -> DiskArray:
    """Opens a .npy or raw file in place (see DiskArray.open)."""
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
    path = os.fspath(path)
    writable = mode == "r+"
    if (shape is None) != (dtype is None):
        raise ValueError(
            f"{path}: opening a raw file needs both shape= and dtype= (got shape={shape!r}, "
            f"dtype={dtype!r}); a .npy file needs neither"
        )
    if shape is None:
        h = _engine.open(path, "npy", writable)
    else:
        what = f"jask.DiskArray.open({path!r})"
        shape = as_shape(shape, what)
        offset = as_int(offset, f"{what}: offset")
        if offset < 0:
            raise ValueError(f"{what}: offset must be non-negative, got {offset}")
        try:
            dt = storage_dtype(dtype)
        except TypeError as e:
            raise TypeError(f"{what}: {e}") from None
        check_nbytes(shape, dt, what, offset)
        h = _engine.open(path, "raw", writable, dtype_code(dt), list(shape), offset)
    code, shp, *_ = _engine.info(h)
    return DiskArray(DiskArrayTy(tuple(shp), dtype_from_code(code)), h)


def update_(target, new) -> DiskArray:
    """Replaces `target`'s values with `new`'s; returns `target` (see DiskArray.update_).

    Crash-consistent: the values go to a new file beside the old one
    (``<path>.jask-tmp-<pid>-<random>``, same permission bits), which is
    flushed to disk and renamed over the path. A process killed at any moment
    leaves the file with all old or all new values; a temp file it leaves
    behind is removed the next time the array is opened with mode="r+" or
    updated. Cost over overwriting in place: disk space for a second copy of
    the file while update_ runs, the bytes around the data (a .npy header, a
    raw file's prefix and suffix) copied once, and an fdatasync of the new
    file plus an fsync of its folder (the flush is most of the extra time;
    scratch arrays skip it, as they never outlive the process). Hard links to
    the old file keep the old values.
    """
    if compat.is_tracer(getattr(target, "_handle", None)):
        raise TypeError(
            "DiskArray.update_() writes files and cannot run inside jax.jit or "
            "jax.grad; call it on the concrete result, outside the transformed "
            "function"
        )
    check_disk("update_", target)
    if not isinstance(new, DiskArray):
        raise TypeError(f"DiskArray.update_ expects a DiskArray, got {type(new).__name__}")
    if compat.is_tracer(new._handle):
        raise TypeError("DiskArray.update_() cannot take a traced value; call it outside jax.jit")
    if new.shape != target.shape or new.dtype != target.dtype:
        raise ValueError(
            f"update_: the new value {describe(new)} does not match the array "
            f"{describe(target)}; shape and dtype must be equal"
        )
    _runtime.ensure_scratch()
    if new.handle != target.handle:
        _engine.copy_into(target.handle, new.handle)
    return target
