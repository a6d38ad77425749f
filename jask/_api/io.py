"""Moving arrays between memory and files: from_numpy, open, update_, update_tree_, materialize."""

from __future__ import annotations

import os

import jax
import numpy as np

from .. import _engine, _progress, _runtime
from .._dtypes import dtype_code, dtype_from_code, jax_dtype, storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import apply, describe
from .._shapes import as_int, as_shape, check_nbytes
from ..ops import Astype, FromInMemory, ToInMemory
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
    # Concrete data goes straight to the engine, in the dtype jnp.asarray would give it
    # (float64 is float32 while jax_enable_x64 is off).
    arr = np.asarray(array)
    dt = storage_dtype(jax_dtype(arr.dtype))
    arr = arr.astype(dt, copy=False)
    arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # ascontiguousarray makes 0-d 1-d
    _runtime.ensure_scratch()
    out = DiskArray(DiskArrayTy(arr.shape, dt), _engine.create(dtype_code(dt), list(arr.shape)))
    _progress.settled(_engine.write_from)(out.handle, arr.reshape(-1).view(np.uint8))
    return out


# NumPy's and so JAX's limit (NPY_MAXDIMS): an array with more dimensions could not be read.
MAX_NDIM = 64


def open_array(path, *, shape=None, dtype=None, offset=0, mode="r") -> DiskArray:
    """Opens a .npy or raw file in place (see DiskArray.open)."""
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
    path = os.fsdecode(os.fspath(path))
    if "\0" in path:  # the engine's C string would end there: another file's name
        raise ValueError(f"jask.DiskArray.open: the path {path!r} holds a NUL character")
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
        if len(shape) > MAX_NDIM:
            raise ValueError(
                f"{what}: shape has {len(shape)} dimensions; NumPy and JAX arrays have at most "
                f"{MAX_NDIM}"
            )
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
    return in_jax_dtype(DiskArray(DiskArrayTy(tuple(shp), dtype_from_code(code)), h), path)


def in_jax_dtype(x: DiskArray, path) -> DiskArray:
    """An opened file's array as JAX would hold its values (every opener's last step): a
    float64, int64, uint64 or complex128 file opened while jax_enable_x64 is off is read into a
    float32, int32, uint32 or complex64 scratch array (the file is left as it is; the engine
    converts as jax.lax.convert_element_type does), as jnp.asarray(np.load(path)) gives it;
    with mode="r+" it is refused, since updates could not reach the file."""
    dtype = jax_dtype(x.dtype)
    if dtype == x.dtype:
        return x
    if x.writable:
        raise TypeError(
            f"{path}: holds {x.dtype.name} values, which JAX holds as {dtype.name} while "
            f"jax_enable_x64 is off, so mode='r+' cannot update the file in place; enable x64 "
            f"(jax.config.update('jax_enable_x64', True)) or open it with mode='r' (a "
            f"{dtype.name} copy in scratch)"
        )
    return apply(Astype, x, dtype=dtype)


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
    the old file keep the old values. Readers in other threads see all old or
    all new values: each engine call (an eager op, one call of a jitted
    program, np.asarray) reads one version of each array, and the rename
    waits for the calls reading the file to end. Between two calls of one
    jitted program an update may land; use update_tree_ to change several
    arrays as one step.

    In a file holding more than 1 MiB besides the array (a safetensors
    shard, a raw file of several arrays, an HDF5 file), the new values go to
    a journal beside it (``<path>.jask-journal``), which is flushed and then
    copied over the array's bytes in place: the rest of the file is never
    rewritten, and the next writable open (``mode="r+"``) or update of the
    file finishes an update a crash interrupted; a read-only open reads the
    committed values through the journal and changes nothing. Readers in
    this process wait during the copy; other processes reading the file
    meanwhile may see it half-written.
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
        _progress.settled(_engine.copy_into)(target.handle, new.handle)
    return target


def update_tree_(targets, new_values):
    """Replaces the values of every DiskArray in `targets` with `new_values`' as one step.

    A crash cannot tear it: after a process is killed at any moment, every
    array holds its old values or every array holds its new ones, as seen by
    the next open of any of their files. A writable open (``mode="r+"``) or
    update finishes or undoes the step a dead process left (finishing it
    renames files in their folders, so an open by a user who may not write
    there raises an OSError saying so); a read-only open reads the committed
    values and changes nothing.
    Readers in other threads see each array all old or all new. Each leaf's
    values go to a new file beside it, as for `update_`; then one small
    commit record (``<first file>.jask-txn-<id>.journal``) is flushed, the new
    files are renamed over the old ones and the record is removed. Cost over
    `update_` of each leaf: a pointer file beside each file, the commit
    record and its flush, one fsync per folder. Scratch leaves take part
    without flushing (they die with the process).

    Args:
      targets: a pytree of writable DiskArrays (opened with mode="r+", or
        scratch arrays); no file may appear twice (two views of one file).
      new_values: a pytree of DiskArrays of the same structure, each leaf of
        its target's shape and dtype.

    Returns:
      `targets`.

    >>> import numpy as np, jask, tempfile, os
    >>> d = tempfile.mkdtemp(); paths = [os.path.join(d, f"{n}.npy") for n in "wb"]
    >>> for p in paths: np.save(p, np.zeros(2, np.float32))
    >>> params = {n: jask.DiskArray.open(p, mode="r+") for n, p in zip("wb", paths)}
    >>> _ = jask.update_tree_(params, jax.tree_util.tree_map(lambda a: a + 1.0, params))
    >>> np.asarray(params["w"]).tolist(), np.asarray(params["b"]).tolist()
    ([1.0, 1.0], [1.0, 1.0])
    """
    keyed, structure = jax.tree_util.tree_flatten_with_path(targets)
    news, new_structure = jax.tree_util.tree_flatten(new_values)
    if new_structure != structure:
        raise ValueError(
            f"update_tree_: new_values must have the structure of targets: {structure} "
            f"vs {new_structure}"
        )
    names = [f"targets{jax.tree_util.keystr(path)}" for path, _ in keyed]
    for name, (_, target), new in zip(names, keyed, news):
        for role, leaf in (("targets", target), ("new_values", new)):
            if compat.is_tracer(leaf) or compat.is_tracer(getattr(leaf, "_handle", None)):
                raise TypeError(
                    "update_tree_() writes files and cannot run inside jax.jit or jax.grad; "
                    "call it on the concrete result, outside the transformed function"
                )
            if not isinstance(leaf, DiskArray):
                where = name.replace("targets", role, 1)
                raise TypeError(
                    f"update_tree_: {where} is a {type(leaf).__name__}, not a DiskArray; "
                    "every leaf of both trees must be a DiskArray"
                )
        if new.shape != target.shape or new.dtype != target.dtype:
            raise ValueError(
                f"update_tree_: the new value {describe(new)} of {name} does not match the "
                f"array {describe(target)}; shape and dtype must be equal"
            )
    _runtime.ensure_scratch()
    pairs = [(t.handle, n.handle, name) for name, (_, t), n in zip(names, keyed, news)]
    _progress.settled(_engine.copy_all_into)(
        [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]
    )
    return targets
