"""Indexing: x[key], rows, take."""

from __future__ import annotations

import builtins
import numbers
import operator

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._jax import compat
from .._jax.diskarray import DiskArray, with_weak_type
from .._jax.op import apply, describe
from ..ops import (
    Concatenate,
    DynamicSlice,
    DynamicSliceInMemory,
    DynamicUpdateSlice,
    FromInMemory,
    Rows,
    ScatterAddRows,
    Slice,
    SliceInMemory,
    Take,
    TakeAlongRows,
    TakeInMemory,
    Transpose,
)
from . import elementwise, search
from .io import from_numpy, materialize
from .operands import check_disk, in_memory_limit
from .shape import reshape


def rows(x, start, count: int) -> jax.Array:
    """Rows [start, start + count) of x's leading axis as an in-memory jax.Array.

    `start` may be traced (a mini-batch index inside jit); as in
    lax.dynamic_slice it is clamped so the rows stay inside the array.
    Differentiable with respect to x.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(10, dtype=np.float32).reshape(5, 2))
    >>> jask.rows(x, 1, 2).tolist()
    [[2.0, 3.0], [4.0, 5.0]]
    """
    check_disk("rows", x)
    if not isinstance(count, (int, np.integer)) or compat.is_tracer(count):
        raise TypeError(f"jask.rows: count must be a static int, got {count!r}")
    if np.ndim(start) != 0:
        raise TypeError(f"jask.rows: start must be a scalar, got shape {np.shape(start)}")
    return apply(Rows, x, jnp.asarray(start, jnp.int32), count=int(count))


def take(x, indices, axis=0):
    """Rows of x at integer `indices` along the leading axis, like jnp.take(x, indices, axis=0)
    and x[indices] (x[list] and Jask's own callers; jask.take is jnp.take).

    Args:
      x: a DiskArray with at least one axis.
      indices: an integer array of any shape (NumPy or JAX, concrete or traced inside jit,
        e.g. ``jax.random.randint(key, (256,), 0, n)``; or a DiskArray, read block by block),
        or a list of ints. Duplicates are allowed; negative indices count from the end.
      axis: 0 (jnp.take takes any axis).

    Returns:
      An array of shape ``indices.shape + x.shape[1:]``: a jax.Array when it has at most
      IN_MEMORY_LIMIT elements, else a DiskArray. Differentiable with respect to x (the gradient
      scatter-adds the cotangent rows, so duplicate indices accumulate).

    Raises:
      IndexError: a concrete index outside [-n, n) for n = x.shape[0]. Traced and DiskArray
        indices are not checked: one still out of range after wrapping a negative index once is
        clamped to [0, n - 1], as jnp does for x[idx] gathers.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(10, dtype=np.float32).reshape(5, 2))
    >>> from jask._api.indexing import take
    >>> take(x, np.array([4, 0, -1])).tolist()
    [[8.0, 9.0], [0.0, 1.0], [8.0, 9.0]]
    """
    check_disk("take", x)
    if x.ndim == 0:
        raise ValueError(f"jask.take: {describe(x)} has no axis to take from")
    if axis is None or not -x.ndim <= int(axis) < x.ndim:
        raise ValueError(f"jask.take: invalid axis {axis!r} for {describe(x)}")
    if int(axis) % x.ndim != 0:
        raise NotImplementedError(
            f"jask.take supports axis=0 only, got axis={axis} for {describe(x)} (jnp.take and "
            f"the gather primitive take any axis)"
        )
    if _is_disk_value(indices):  # read block by block (the gather rule), never whole
        if not jnp.issubdtype(indices.dtype, jnp.integer):
            raise TypeError(f"jask.take: indices must be integers, got {describe(indices)}")
        n = x.shape[0]
        wrapped = jnp.where(indices < 0, indices + n, indices)  # once, then clamped
        return jnp.take(x, wrapped, axis=0, mode="clip")
    idx = _row_indices("take", indices, x.shape[0])
    scalar = idx.ndim == 0
    idx = idx.reshape(1) if scalar else idx
    numel = int(np.prod(idx.shape + x.shape[1:], dtype=np.int64))
    in_memory = numel <= in_memory_limit()
    out = apply(TakeInMemory if in_memory else Take, x, idx)
    if scalar:
        return out[0] if in_memory else reshape(out, x.shape[1:])
    return out


def _row_indices(fn: str, indices, n: int):
    """`indices` as an int32 array (int64 for axes longer than int32 can count); concrete
    indices are checked against [-n, n) and stay concrete."""
    if isinstance(indices, (list, tuple)):
        concrete = not any(compat.is_tracer(i) for i in indices)
        indices = np.asarray(indices, np.int64) if concrete else jnp.asarray(indices)
    if not (
        isinstance(indices, (np.ndarray, np.integer, jax.Array, int)) or compat.is_tracer(indices)
    ):
        raise TypeError(
            f"jask.{fn}: indices must be an integer array, got {type(indices).__name__}"
        )
    dtype = np.dtype(indices.dtype) if hasattr(indices, "dtype") else np.dtype(np.int64)
    if dtype == np.bool_ or not np.issubdtype(dtype, np.integer):
        raise TypeError(
            f"jask.{fn}: indices must be integers, got {dtype.name}; boolean masks "
            f"are not supported"
        )
    wide = n > np.iinfo(np.int32).max
    if compat.is_tracer(indices):
        if indices.dtype == jnp.int32 or (wide and indices.dtype == jnp.int64):
            return indices
        # clamped before narrowing, so no wide index wraps around into the range
        low = 0 if np.issubdtype(dtype, np.unsignedinteger) else -n
        return jnp.clip(indices, low, n - 1).astype(jnp.int32)
    values = np.asarray(indices)
    bad = (values < -n) | (values >= n)
    if bad.any():
        raise IndexError(
            f"jask.{fn}: index {values[bad].flat[0]} is out of bounds for axis 0 with size {n}"
        )
    return values.astype(np.int64 if wide else np.int32)


def getitem(x, key):
    """x[key] with jnp's indexing semantics (see `_getitem`); the result is weakly typed where
    x is, as every indexing primitive of JAX keeps its operand's weak_type."""
    result = _getitem(x, key)
    return with_weak_type(result, compat.typeof(x).weak_type) if result is not x else x


def _getitem(x, key):
    """x[key] with jnp's indexing semantics.

    Basic keys: ints (negative count from the end), slices with any nonzero step, Ellipsis and
    None, in any combination (``x[5, :, 1:4]``, ``x[..., 2:9:3]``, ``x[None, ::-1]``); a
    traced scalar int as the first key selects a row inside jit (clamped, as in
    lax.dynamic_slice). Advanced keys go through jnp's own indexing to one gather: integer
    arrays on any axes (broadcast together; adjacent ones keep their place, separated ones go
    first; out of range clamped, as jnp's x[idx]), in memory or DiskArrays (read block by
    block), and boolean masks (a concrete one selects its True elements; a DiskArray mask is
    counted by a streamed sum first; a traced mask raises NonConcreteBooleanIndexError). A list
    key is jnp's TypeError; a list inside a tuple key is an index array.

    Results with at most IN_MEMORY_LIMIT elements are jax.Arrays; larger ones are DiskArrays: a
    view of x's file (no copy) when the selected elements are one contiguous range
    (``x[i:j]``, ``x[i]``), a streamed copy otherwise. Differentiable with respect to x.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    >>> x[:, 1].tolist(), x[1:, ::-2].tolist()
    ([1.0, 5.0, 9.0], [[7.0, 5.0], [11.0, 9.0]])
    """
    if isinstance(key, list):  # jnp's own error (a list inside a tuple is an index array)
        raise TypeError(
            "Using a non-tuple sequence for multidimensional indexing is not allowed; use "
            "`arr[array(seq)]` instead of `arr[seq]`. See https://github.com/jax-ml/jax/issues/4564 "
            "for more information."
        )
    key = key if isinstance(key, tuple) else (key,)
    if _is_advanced(key):
        return _advanced_getitem(x, key)
    if key and isinstance(key[0], list):  # a list of row indices (jnp wants an array)
        return _index_rows(take(x, key[0]), np.ndim(key[0]), key[1:])
    if key and compat.is_tracer(key[0]) and np.ndim(key[0]) == 0 and x.ndim:
        i = key[0]
        _reject_mask(i)
        if not np.issubdtype(i.dtype, np.integer):
            raise TypeError(f"DiskArray indices must be integers, got a traced {i.dtype} scalar")
        return _index_rows(rows(x, jnp.where(i < 0, i + x.shape[0], i), 1)[0], 0, key[1:])
    selection, shape = _selection(x, key)
    size = int(np.prod(shape, dtype=np.int64))
    if x.ndim == 0:
        return jnp.reshape(materialize(x), shape)
    if all(s == (0, 1, n) for s, n in zip(selection, x.shape)):
        if not shape:  # x[0, 0] of a [1, 1] array: a 0-d result is in memory, as every one is
            return jnp.reshape(materialize(x), shape)
        return x if x.shape == shape else reshape(x, shape)  # every element: x itself (x[:, None])
    if size <= in_memory_limit():
        (start, step, count), rest = selection[0], selection[1:]
        if step == 1 and all(s == (0, 1, n) for s, n in zip(rest, x.shape[1:])):
            result = rows(x, start, count)  # whole leading rows: one read
        else:
            result = apply(SliceInMemory, x, selection=selection)
        return result if result.shape == shape else jnp.reshape(result, shape)
    result = apply(Slice, x, selection=selection)
    return result if result.shape == shape else reshape(result, shape)


def _is_mask(k) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return True
    if isinstance(k, list):
        return any(isinstance(v, (bool, np.bool_)) for v in np.ravel(np.asarray(k, object)))
    return getattr(k, "dtype", None) == np.bool_


def _is_advanced(key) -> bool:
    """Whether `key` needs jnp's full indexing (rather than Jask's basic indexing): index
    arrays (a list of ints as the first key aside), DiskArray indices, boolean masks, a traced
    index after the first key."""
    arrays = [i for i, k in enumerate(key) if _is_index_array(k)]
    return (
        any(_is_disk_value(k) or _is_mask(k) for k in key)
        or len(arrays) > 1
        or any(i > 0 or not isinstance(key[i], list) for i in arrays)
        or any(compat.is_tracer(k) for k in key[1:])
    )


def _advanced_getitem(x, key):
    """x[key] as jnp indexes: integer arrays broadcast together (adjacent ones keep their place,
    separated ones go first), boolean masks replaced by the integer arrays of their True
    elements (a DiskArray mask by `mask_positions`, through JAX's indexing), and one gather at
    the combined indices (DiskArray indices are read block by block)."""
    return compat.rewriting_take(x, key)


def mask_positions(shape, key: tuple) -> tuple:
    """`key` (for x[key] or x.at[key], x of `shape`) with each DiskArray boolean mask replaced
    by the integer arrays of its True elements (as np.nonzero gives them), read block by block.
    A traced mask raises JAX's
    NonConcreteBooleanIndexError; JAX's indexing takes what is left (compat's
    disk_boolean_masks patch calls this for every jnp indexing)."""
    return tuple(_mask_positions(tuple(shape), key))


def _mask_positions(shape, key):
    ndim = len(shape)
    consumed = builtins.sum(
        np.ndim(k) if _is_mask(k) else 0 if k is None or k is Ellipsis else 1 for k in key
    )
    axis = 0
    for position, k in enumerate(key):
        if k is Ellipsis:
            axis += builtins.max(0, ndim - consumed)
            yield k
            continue
        if k is None:
            yield k
            continue
        if not (_is_disk_value(k) and k.dtype == np.bool_):
            axis += np.ndim(k) if _is_mask(k) else 1
            yield k
            continue
        if compat.is_tracer(k):
            raise jax.errors.NonConcreteBooleanIndexError(compat.ShapedArray(k.shape, np.bool_))
        if k.ndim == 0:
            with jax.ensure_compile_time_eval():  # closed over in jit: concrete, as in jnp
                yield bool(materialize(k))
            continue
        expected = list(shape[axis : axis + k.ndim])
        # jnp's rule and error: each of the mask's axes has the indexed axis's size, or 0 (an
        # empty mask selects nothing)
        if not builtins.all(m in (0, n) for m, n in zip(k.shape, expected)):
            raise IndexError(
                f"boolean index did not match shape of indexed array in index {position}: got "
                f"{tuple(k.shape)}, expected {expected}"
            )
        if k.size == 0:  # no elements to read: jnp's indexing takes it as it is
            axis += k.ndim
            yield np.zeros(k.shape, np.bool_)
            continue
        yield from _true_positions(k)
        axis += k.ndim


def masked_update(x, key, y, combine: str):
    """x.at[key].<combine>(y) (combine one of set, add, sub, mul, min, max) as one streamed
    select, where x is a DiskArray, `key` a concrete DiskArray mask of x's leading axes (then
    only ':' or '...') and y broadcasts against x's other axes: each selected element combined
    with y as the scatter would (in the dtype x and y promote to, cast back to x's), the others
    x's. None for any other update, which JAX's scatter takes (at the mask's positions)."""
    key = key if isinstance(key, tuple) else (key,)
    mask, rest = (key[0], key[1:]) if key else (None, ())
    if not (_is_disk_value(x) and _is_disk_value(mask) and mask.dtype == np.bool_):
        return None
    if compat.is_tracer(mask) or mask.ndim == 0 or mask.shape != x.shape[: mask.ndim]:
        return None  # JAX's error, its NonConcreteBooleanIndexError, or a scalar mask
    if builtins.sum(1 for k in rest if k is Ellipsis) > 1 or not all(
        k is Ellipsis or k == slice(None) for k in rest
    ):
        return None
    if _is_disk_value(y) or np.ndim(y) > x.ndim - mask.ndim:
        return None
    y = jnp.asarray(y)
    dtype = jnp.promote_types(x.dtype, y.dtype)
    old, y = x.astype(dtype) if dtype != x.dtype else x, y.astype(dtype)
    new = {
        "set": lambda: jnp.broadcast_to(y, y.shape),
        "add": lambda: old + y,
        "sub": lambda: old - y,
        "mul": lambda: old * y,
        "min": lambda: jnp.minimum(old, y),
        "max": lambda: jnp.maximum(old, y),
    }[combine]()
    new = new.astype(x.dtype) if new.dtype != x.dtype else new
    selected = reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim))
    return jnp.where(selected, new, x)


def _true_positions(mask) -> tuple:
    """np.nonzero of a DiskArray mask (the integer arrays JAX's indexing expands an in-memory
    mask into), read one budget-sized block of its leading axis at a time: NumPy arrays while
    they have at most IN_MEMORY_LIMIT elements, else DiskArrays written as they are found (JAX's
    indexing then gathers or scatters at DiskArray indices, block by block). Eager even inside
    jit, where a concrete mask is closed over (jnp's indexing takes a concrete mask there)."""
    n = mask.shape[0]
    budget = _runtime.memory_budget()
    row = builtins.max(1, int(np.prod(mask.shape[1:], dtype=np.int64)))
    block = builtins.max(1, budget // 8 // row)
    dtype = np.int64 if builtins.max(mask.shape) > np.iinfo(np.int32).max else np.int32
    found, held, written = [], 0, []  # positions in memory (`held` of them), parts on disk
    with jax.ensure_compile_time_eval():
        for start in range(0, n, block):
            stop = builtins.min(n, start + block)
            part = np.nonzero(np.asarray(_index_block(mask, start, stop)))
            found.append((part[0] + start, *part[1:]))
            held += part[0].size * mask.ndim
            # too many for memory: to disk, then in parts of half the budget as they are found
            too_many = held > in_memory_limit()
            if too_many or (written and held * np.dtype(dtype).itemsize > budget // 2):
                written.append(_positions_on_disk(found, dtype))
                found, held = [], 0
        if not written:
            return tuple(np.concatenate(axis) for axis in zip(*found))
        if found:
            written.append(_positions_on_disk(found, dtype))
        return tuple(
            parts[0] if len(parts) == 1 else apply(Concatenate, *parts, axis=0)
            for parts in zip(*written)
        )


def _positions_on_disk(found, dtype) -> tuple:
    return tuple(from_numpy(np.concatenate(axis).astype(dtype)) for axis in zip(*found))


def _is_index_array(k) -> bool:
    if isinstance(k, list):
        return True
    return (isinstance(k, (np.ndarray, jax.Array)) or compat.is_tracer(k)) and np.ndim(k) > 0


def _index_rows(rows_, axes: int, rest):
    """`rest` applied to gathered rows, after their leading `axes` index axes."""
    if not rest:
        return rows_
    return rows_[(slice(None),) * axes + tuple(rest)]


def _reject_mask(k) -> None:
    if isinstance(k, (bool, np.bool_)) or getattr(k, "dtype", None) == np.bool_:
        if compat.is_tracer(k):  # JAX's own error for a traced mask (of any array)
            raise jax.errors.NonConcreteBooleanIndexError(compat.ShapedArray(k.shape, np.bool_))
        raise NotImplementedError(
            "boolean mask indices are not supported: a mask selects a "
            "data-dependent number of elements, so the result has no "
            "static shape"
        )


def _selection(x, key):
    """(start, step, count) per axis of x, and the shape of x[key] (an int drops its axis,
    None adds one)."""
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    indexed = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if indexed > x.ndim:
        raise IndexError(
            f"too many indices for a DiskArray of shape {x.shape}: {indexed} were "
            f"indexed, it has {x.ndim} axes"
        )
    if not any(k is Ellipsis for k in key):
        key = (*key, Ellipsis)
    selection, shape, axis = [], [], 0
    for k in key:
        if k is Ellipsis:
            for n in x.shape[axis : axis + x.ndim - indexed]:
                selection.append((0, 1, n))
                shape.append(n)
            axis += x.ndim - indexed
        elif k is None:
            shape.append(1)
        elif isinstance(k, slice):
            start, step, count = _slice_range(k, x.shape[axis], axis)
            selection.append((start, step, count))
            shape.append(count)
            axis += 1
        else:
            selection.append((_int_index(k, x.shape[axis], axis), 1, 1))
            axis += 1
    return tuple(selection), tuple(shape)


def _slice_range(k: slice, n: int, axis: int):
    bounds = (k.start, k.stop, k.step)
    if any(compat.is_tracer(v) for v in bounds):
        raise TypeError(
            "a slice with traced bounds has no static size; use jask.rows(x, "
            "start, count) or jax.lax.dynamic_slice_in_dim(x, start, count)"
        )
    try:  # ints, NumPy and concrete JAX integer scalars
        k = slice(*(None if v is None else operator.index(v) for v in bounds))
    except TypeError:
        raise TypeError(
            f"slice bounds must be integers or None, got {k!r} on axis {axis}"
        ) from None
    if k.step == 0:
        raise ValueError(f"slice step cannot be zero (axis {axis})")
    start, stop, step = k.indices(n)
    count = len(range(start, stop, step))
    return (start, step, count) if count else (0, 1, 0)


def _int_index(k, n: int, axis: int) -> int:
    _reject_mask(k)
    if compat.is_tracer(k):
        raise NotImplementedError(
            f"a traced index is supported as the first index only (x[i], "
            f"jask.rows); got one for axis {axis}"
        )
    if (
        isinstance(k, (np.ndarray, jax.Array))
        and np.ndim(k) == 0
        and np.issubdtype(k.dtype, np.integer)
    ):
        k = int(k)
    if isinstance(k, (np.ndarray, jax.Array, list)):
        raise NotImplementedError(
            f"integer-array indices are supported as the first index only "
            f"(x[idx] gathers rows); got one for axis {axis}"
        )
    if not isinstance(k, (numbers.Integral, np.integer)):
        raise TypeError(
            f"DiskArray indices must be integers, slices, Ellipsis, None or an integer "
            f"array of rows; got {type(k).__name__} for axis {axis}"
        )
    i = int(k) + n if k < 0 else int(k)
    if not 0 <= i < n:
        raise IndexError(f"index {int(k)} is out of bounds for axis {axis} with size {n}")
    return i


# -- jax.lax's slices ------------------------------------------------------------------


def selected(x, selection):
    """x[selection] ((start, step, count) per axis) as jask.getitem gives it: x itself, an
    in-memory jax.Array when small, else a DiskArray (a view of x's file where the selection
    is one contiguous range)."""
    if all(s == (0, 1, n) for s, n in zip(selection, x.shape)):
        return x
    shape = tuple(n for _, _, n in selection)
    return apply(SliceInMemory if _fits(shape) else Slice, x, selection=selection)


def _static_starts(starts):
    """The start indices as ints where none is traced, else None."""
    if any(compat.is_tracer(s) or _is_disk_value(s) for s in starts):
        return None
    return [int(s) for s in starts]


def _start_operands(starts):
    return [jnp.asarray(s).astype(jnp.int32) for s in starts]


def dynamic_slice(x, starts, slice_sizes):
    """jax.lax.dynamic_slice of a DiskArray at in-memory start indices, each clamped so that
    the slice stays inside x (as XLA does); in memory when small, as `selected`."""
    sizes = tuple(int(s) for s in slice_sizes)
    if not _is_disk_value(x) or any(_is_disk_value(s) for s in starts):
        raise NotImplementedError(
            "jax.lax.dynamic_slice needs a DiskArray operand and in-memory start indices"
        )
    static = _static_starts(starts)
    if static is not None:
        clamped = [min(max(s, 0), n - k) for s, n, k in zip(static, x.shape, sizes)]
        return selected(x, tuple((s if k else 0, 1, k) for s, k in zip(clamped, sizes)))
    op = DynamicSliceInMemory if _fits(sizes) else DynamicSlice
    return apply(op, x, *_start_operands(starts), sizes=sizes)


def dynamic_update_slice(operand, update, starts):
    """jax.lax.dynamic_update_slice: a new DiskArray, the operand with the update (on disk or
    in memory) at the start indices, clamped so that the update fits (as XLA does)."""
    if any(_is_disk_value(s) for s in starts):
        raise NotImplementedError("jax.lax.dynamic_update_slice with DiskArray start indices")
    if not _is_disk_value(operand):
        operand = apply(FromInMemory, jnp.asarray(operand))
    update = update if _is_disk_value(update) else jnp.asarray(update, operand.dtype)
    return apply(DynamicUpdateSlice, operand, update, *_start_operands(starts))


# -- jax.lax.gather and jax.lax.scatter -------------------------------------------------
#
# jax.numpy's indexing (x[idx], x[:, idx], jnp.take, jnp.take_along_axis, x.at[...]) binds
# gather and scatter with in-memory indices. Two forms cover what it produces:
#   rows: every window is one element along the indexed axes (start_index_map and the
#     batching axes) and whole along the others. The indexed axes are moved to the front
#     and merged into one, so each window is one row, found by a flat row index computed in
#     memory from the indices: a row gather (`Take`) or scatter (`ScatterAddRows`).
#   one window: a single index vector (no batch axes), any window: a dynamic slice.


def _integer_indices(primitive, indices):
    indices = jnp.asarray(indices)
    if not jnp.issubdtype(indices.dtype, jnp.integer):  # worded as jax.lax's own check
        raise ValueError(
            f"indices must have an integer type (jax.lax.{primitive} of a DiskArray at "
            f"{describe(indices)})"
        )
    return indices


def _mode_name(mode) -> str:
    name = getattr(mode, "name", None) or str(mode)
    return {"CLIP": "clip", "FILL_OR_DROP": "fill", "PROMISE_IN_BOUNDS": "clip"}.get(
        name, name.lower()
    )


def _mode_is_promise(mode) -> bool:
    return (getattr(mode, "name", None) or str(mode)).upper() == "PROMISE_IN_BOUNDS"


def _default_fill(dtype):
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if dtype == np.bool_:
        return True
    info = np.iinfo(dtype)
    return info.min if np.issubdtype(dtype, np.signedinteger) else info.max


class _Rows:
    """A gather's or scatter's windows as rows of the operand with its indexed axes merged
    into a leading one: the permutation that brings them to the front, the merged shape, and
    per window element (over the indices' batch shape, then one axis per window wider than
    one element along an indexed axis, `widths`) its flat row index and whether its window
    is inside the operand. A wide window's start is clamped so that it fits, as XLA does."""

    def __init__(
        self, shape, indices, index_map, operand_batching, indices_batching, clip, widths=None
    ):
        widths = widths or {}
        self.indexed = tuple(index_map) + tuple(operand_batching)
        self.rest = tuple(d for d in range(len(shape)) if d not in self.indexed)
        self.perm = self.indexed + self.rest
        rows = int(np.prod([shape[d] for d in self.indexed], dtype=np.int64))
        self.shape = (rows, *(shape[d] for d in self.rest))
        batch_shape = tuple(indices.shape[:-1])
        self.wide = tuple(d for d in index_map if widths.get(d, 1) > 1)
        self.batch_shape = batch_shape + tuple(widths[d] for d in self.wide)
        lifted = batch_shape + (1,) * len(self.wide)
        valid = jnp.ones(lifted, bool)
        flat = jnp.zeros(self.batch_shape, jnp.int32)
        for k, d in enumerate(index_map):
            n, width = shape[d], widths.get(d, 1)
            start = jnp.reshape(indices[..., k].astype(jnp.int32), lifted)
            valid = valid & (start >= 0) & (start <= n - width)
            coord = jnp.clip(start, 0, n - width)
            if width > 1:
                axis = len(batch_shape) + self.wide.index(d)
                coord = coord + jnp.reshape(
                    jnp.arange(width, dtype=jnp.int32), _axis_shape(axis, self.batch_shape)
                )
            flat = flat * n + coord
        for d, b in zip(operand_batching, indices_batching):
            iota = jnp.arange(batch_shape[b], dtype=jnp.int32)
            flat = flat * shape[d] + jnp.reshape(iota, _axis_shape(b, self.batch_shape))
        self.valid = None if clip else valid
        self.flat = jnp.where(valid, flat, 0) if not clip else flat


def _windows_are_rows(slice_sizes, indexed) -> bool:
    return all(slice_sizes[d] == 1 for d in indexed)


def _axis_shape(axis, shape):
    return tuple(n if d == axis else 1 for d, n in enumerate(shape))


def gather(x, indices, dimension_numbers, slice_sizes, mode, fill_value=None):
    """jax.lax.gather of a DiskArray at in-memory indices (see the forms above).

    The result is an in-memory jax.Array when it has at most IN_MEMORY_LIMIT elements, else
    a DiskArray. Out-of-range windows follow `mode`: clamped (clip, promise_in_bounds), or
    `fill_value` (fill; NaN for inexact dtypes by default).
    """
    dn = dimension_numbers
    if _is_disk_value(indices):
        return _gather_disk_indices(x, indices, dn, slice_sizes, mode, fill_value)
    indices = _integer_indices("gather", indices)
    slice_sizes = tuple(int(s) for s in slice_sizes)
    if _is_along_last_axis(x, indices, dn, slice_sizes):
        return _take_along_last_axis(x, indices, _mode_name(mode) == "clip", fill_value)
    if _is_one_window(indices, dn):
        return _one_window(x, indices, dn, slice_sizes, _mode_name(mode) == "clip", fill_value)
    index_map = tuple(int(d) for d in dn.start_index_map)
    batching = tuple(int(d) for d in dn.operand_batching_dims)
    collapsed = tuple(int(d) for d in dn.collapsed_slice_dims)
    offset_dims = tuple(int(d) for d in dn.offset_dims)
    clip = _mode_name(mode) == "clip"
    indexed = index_map + batching
    # windows shorter than an unindexed axis start at its 0: a static slice first
    if any(slice_sizes[d] != x.shape[d] for d in range(x.ndim) if d not in indexed):
        x = selected(x, tuple((0, 1, slice_sizes[d]) for d in range(x.ndim)))
    widths = {d: slice_sizes[d] for d in index_map}
    rows = _Rows(
        x.shape, indices, index_map, batching, dn.start_indices_batching_dims, clip, widths
    )
    stacked = _reshaped(_permuted(x, rows.perm), rows.shape)
    flat = rows.flat if rows.flat.ndim else rows.flat.reshape(1)
    out_shape = flat.shape + stacked.shape[1:]
    taken = apply(TakeInMemory if _fits(out_shape) else Take, stacked, flat)
    taken = _reshaped(taken, rows.batch_shape + stacked.shape[1:])
    n_batch = len(indices.shape) - 1
    if rows.valid is not None:
        fill = _default_fill(x.dtype) if fill_value is None else fill_value
        valid = jnp.reshape(rows.valid, rows.valid.shape + (1,) * len(rows.rest))
        taken = _where(valid, taken, jnp.asarray(fill, x.dtype))
    elif _mode_is_promise(mode):
        # clamped, but a window off the array passes no gradient back: XLA's scatter-add (the
        # transpose) drops it, so jnp's gradient of x[idx] is zero there
        inside = _Rows(
            x.shape, indices, index_map, batching, dn.start_indices_batching_dims, False, widths
        ).valid
        if compat.is_tracer(inside) or not bool(jnp.all(inside)):
            inside = jnp.reshape(inside, inside.shape + (1,) * len(rows.rest))
            taken = _where(inside, taken, jax.lax.stop_gradient(taken))
    # the window axes in operand order (the size-1 indexed ones that are not collapsed too):
    # wide windows' axes follow the batch axes, the unindexed axes them
    window = [d for d in range(x.ndim) if d not in collapsed and d not in batching]
    order = [d for d in window if d in rows.wide or d in rows.rest]
    sources = [
        n_batch + rows.wide.index(d)
        if d in rows.wide
        else n_batch + len(rows.wide) + rows.rest.index(d)
        for d in order
    ]
    taken = _permuted(taken, tuple(range(n_batch)) + tuple(sources))
    taken = _reshaped(taken, tuple(indices.shape[:-1]) + tuple(slice_sizes[d] for d in window))
    return _permuted(taken, _output_order(n_batch, offset_dims))


def _output_order(n_batch, offset_dims):
    """The permutation from (batch axes, window axes) to a gather's output axes."""
    n_out = n_batch + len(offset_dims)
    batch = iter(range(n_batch))
    return tuple(
        n_batch + offset_dims.index(j) if j in offset_dims else next(batch) for j in range(n_out)
    )


def _is_along_last_axis(x, indices, dn, slice_sizes) -> bool:
    """The gather jnp.take_along_axis(x, idx, axis=-1) makes: positions along the last axis,
    every other axis a batch axis of both operand and indices."""
    last = x.ndim - 1
    leading = tuple(range(last))
    return (
        x.ndim >= 2  # (a 1-D x is one row: the general path takes its elements)
        and tuple(dn.offset_dims) == ()
        and tuple(dn.collapsed_slice_dims) == (last,)
        and tuple(dn.start_index_map) == (last,)
        and tuple(dn.operand_batching_dims) == leading
        and tuple(dn.start_indices_batching_dims) == leading
        and all(s == 1 for s in slice_sizes)
        and indices.ndim == x.ndim + 1
        and indices.shape[-1] == 1
        and tuple(indices.shape[:last]) == tuple(x.shape[:last])
    )


def _is_one_window(indices, dn) -> bool:
    """A gather of one window (x.take(3, axis=1), jnp.take with a scalar index)."""
    return (
        not tuple(dn.operand_batching_dims)
        and indices.ndim >= 1
        and int(np.prod(indices.shape[:-1], dtype=np.int64)) == 1
    )


def _one_window(x, indices, dn, slice_sizes, clip: bool, fill_value):
    """That window as a (dynamic) slice of x: no row of the other axes is read whole. Starts
    are clamped as XLA clamps them; in fill mode a window reaching off the array is all fill."""
    vector = jnp.reshape(indices, (-1,))
    index_map = [int(d) for d in dn.start_index_map]
    starts = [vector[index_map.index(d)] if d in index_map else 0 for d in range(x.ndim)]
    window = dynamic_slice(x, starts, slice_sizes)
    collapsed = {int(d) for d in dn.collapsed_slice_dims}
    sizes = [size for d, size in enumerate(slice_sizes) if d not in collapsed]
    offsets = {int(p): w for p, w in zip(dn.offset_dims, sizes)}
    out = _reshaped(window, tuple(offsets.get(p, 1) for p in range(indices.ndim - 1 + len(sizes))))
    if clip:
        return out
    inside = jnp.all(
        jnp.stack(
            [
                (vector[k] >= 0) & (vector[k] <= x.shape[d] - slice_sizes[d])
                for k, d in enumerate(index_map)
            ]
        )
    )
    fill = _default_fill(x.dtype) if fill_value is None else fill_value
    if not compat.is_tracer(inside):
        return out if bool(inside) else jnp.full(out.shape, fill, x.dtype)
    return _where(inside, out, jnp.asarray(fill, x.dtype))


def _take_along_last_axis(x, indices, clip: bool, fill_value):
    """x's rows streamed, each taken at its own positions (TakeAlongRows): the budget holds a
    row, not the whole of the other axes (as moving the last axis first would need)."""
    n = x.shape[-1]
    positions = jnp.reshape(indices, indices.shape[:-1]).astype(jnp.int32)
    valid = None if clip else (positions >= 0) & (positions < n)
    positions = jnp.clip(positions, 0, n - 1)
    taken = apply(TakeAlongRows, x, apply(FromInMemory, positions))
    if valid is not None:
        fill = _default_fill(x.dtype) if fill_value is None else fill_value
        taken = _where(valid, taken, jnp.asarray(fill, x.dtype))
    return materialize(taken) if _fits(taken.shape) and _is_disk_value(taken) else taken


def _is_disk_value(x) -> bool:
    return isinstance(x, DiskArray)


def _fits(shape) -> bool:
    return int(np.prod(shape, dtype=np.int64)) <= in_memory_limit()


def _permuted(x, perm):
    perm = tuple(perm)
    if perm == tuple(range(x.ndim)):
        return x
    return apply(Transpose, x, perm=perm) if _is_disk_value(x) else jnp.transpose(x, perm)


def _reshaped(x, shape):
    shape = tuple(int(d) for d in shape)
    if tuple(x.shape) == shape:
        return x
    return reshape(x, shape) if _is_disk_value(x) else jnp.reshape(x, shape)


def _where(condition, x, y):
    if _is_disk_value(x) or _is_disk_value(y):
        return elementwise.where(condition, x, y)
    return jnp.where(condition, x, y)


def scatter(x, indices, updates, dimension_numbers, mode, combine, unique_indices=False):
    """jax.lax.scatter (combine "set"), scatter-add, -mul, -min and -max into a DiskArray at
    in-memory indices, as a new DiskArray (see the forms above).

    Duplicate indices: "set" keeps the last update, the others combine all of them (updates
    in memory; DiskArray updates need unique indices for mul, min and max). Out-of-range
    windows are dropped (fill_or_drop) or clamped (clip, promise_in_bounds).
    """
    dn = dimension_numbers
    if _is_disk_value(indices):
        return _scatter_disk_indices(x, indices, updates, dn, mode, combine, unique_indices)
    if not _is_disk_value(x):
        x = apply(FromInMemory, jnp.asarray(x))
    indices = _integer_indices("scatter", indices)
    updates = updates if _is_disk_value(updates) else jnp.asarray(updates, x.dtype)
    index_map = tuple(int(d) for d in dn.scatter_dims_to_operand_dims)
    batching = tuple(int(d) for d in dn.operand_batching_dims)
    inserted = tuple(int(d) for d in dn.inserted_window_dims)
    window_dims = tuple(int(d) for d in dn.update_window_dims)
    clip = _mode_name(mode) == "clip"
    # the window's size along each operand axis: 1 where inserted or batching
    window_axes = [d for d in range(x.ndim) if d not in inserted and d not in batching]
    sizes = [1] * x.ndim
    for d, u in zip(window_axes, window_dims):
        sizes[d] = updates.shape[u]
    # updates as (scatter batch axes..., window axes in operand order)
    n_batch = updates.ndim - len(window_dims)
    batch_axes = tuple(d for d in range(updates.ndim) if d not in window_dims)
    updates = _permuted(updates, batch_axes + window_dims)
    if indices.ndim == 1 and not batching and n_batch == 0:  # one window: one streamed pass
        return _scatter_window(x, indices, updates, index_map, sizes, clip, combine)
    if all(sizes[d] == 1 for d in batching) and all(
        sizes[d] == x.shape[d] for d in range(x.ndim) if d not in index_map + batching
    ):
        return _scatter_rows(
            x,
            indices,
            updates,
            window_axes,
            index_map,
            batching,
            dn,
            clip,
            combine,
            unique_indices,
            sizes,
        )
    raise NotImplementedError(
        f"jax.lax.scatter into {describe(x)} of windows {tuple(sizes)} at indices "
        f"{describe(indices)}: supported are windows whole along the axes not indexed, and one "
        f"window at one index vector"
    )


def _scatter_rows(
    x, indices, updates, window_axes, index_map, batching, dn, clip, combine, unique, sizes
):
    widths = {d: sizes[d] for d in index_map}
    rows = _Rows(
        x.shape, indices, index_map, batching, dn.scatter_indices_batching_dims, clip, widths
    )
    stacked = _reshaped(_permuted(x, rows.perm), rows.shape)
    count = int(np.prod(rows.batch_shape, dtype=np.int64))
    flat = rows.flat.reshape(count)
    row_shape = stacked.shape[1:]
    # the updates' window axes as the rows' axes: wide windows' axes after the batch axes, the
    # unindexed axes last (size-1 window axes of indexed axes drop out)
    n_batch = updates.ndim - len(window_axes)
    ordered = rows.wide + rows.rest
    ones = [d for d in window_axes if d not in ordered]
    perm = tuple(range(n_batch)) + tuple(n_batch + window_axes.index(d) for d in (*ordered, *ones))
    values = _reshaped(_permuted(updates, perm), (count, *row_shape))
    keep = jnp.ones(count, bool)
    if rows.valid is not None:
        keep = jnp.broadcast_to(rows.valid, rows.batch_shape).reshape(count)
    if _is_disk_value(values):
        if combine in ("mul", "min", "max") and not unique:
            raise NotImplementedError(
                f"x.at[...].{combine} with DiskArray updates {describe(values)} at indices that "
                f"may repeat (pass unique_indices=True when they do not)"
            )
        if combine == "set" and not unique:
            keep = keep & _last_of_each(flat)
    elif not unique:
        values, keep = _combined_duplicates(values, flat, keep, combine, x.dtype)
    shape_of = (count,) + (1,) * len(row_shape)
    keep_rows = jnp.reshape(keep, shape_of)
    if combine == "add":
        values = _where(keep_rows, values, jnp.zeros((), x.dtype))
        scattered = apply(ScatterAddRows, values, flat, shape=stacked.shape, dtype=x.dtype)
        out = elementwise.add(stacked, scattered)
    else:
        values = _where(keep_rows, values, jnp.zeros((), x.dtype))
        scattered = apply(ScatterAddRows, values, flat, shape=stacked.shape, dtype=x.dtype)
        hit_shape = (stacked.shape[0],) + (1,) * len(row_shape)
        hits = apply(
            ScatterAddRows, keep_rows.astype(x.dtype), flat, shape=hit_shape, dtype=x.dtype
        )
        hit = elementwise.not_equal(hits, jnp.zeros((), x.dtype))
        out = elementwise.where(hit, _combined(stacked, scattered, combine), stacked)
    unmerged = tuple(x.shape[d] for d in rows.indexed) + row_shape
    inverse = tuple(sorted(range(x.ndim), key=lambda i: rows.perm[i]))
    return _permuted(_reshaped(out, unmerged), inverse)


def _combined(old, new, combine):
    """old and new combined as a scatter's `combine` does (with Jask where either is on disk)."""
    if combine == "set":
        return new
    on_disk = _is_disk_value(old) or _is_disk_value(new)
    if combine == "add":
        return elementwise.add(old, new) if on_disk else old + new
    if combine == "mul":
        return elementwise.mul(old, new) if on_disk else old * new
    if combine == "min":
        return elementwise.minimum(old, new) if on_disk else jnp.minimum(old, new)
    return elementwise.maximum(old, new) if on_disk else jnp.maximum(old, new)


def _last_of_each(flat):
    """Whether each index is the last occurrence of its value (which a "set" keeps)."""
    n = flat.shape[0]
    order = jnp.argsort(flat, stable=True)
    ordered = flat[order]
    last = jnp.concatenate([ordered[1:] != ordered[:-1], jnp.ones(min(n, 1), bool)])
    return jnp.zeros(n, bool).at[order].set(last)


def _combined_duplicates(values, flat, keep, combine, dtype):
    """In-memory updates with duplicate indices combined into the last occurrence of each
    (set: the last one; add: their sum; mul, min, max: their product, minimum, maximum);
    dropped updates (keep False) take no part. Returns the updates and the new keep mask."""
    n = flat.shape[0]
    if n == 0:
        return values, keep
    key = jnp.where(keep, flat, -1)  # dropped updates group apart from the kept ones
    last = _last_of_each(key)
    if combine == "set":
        return values, keep & last
    order = jnp.argsort(key, stable=True)
    ordered = key[order]
    starts = jnp.concatenate([jnp.ones(1, bool), ordered[1:] != ordered[:-1]])
    group = jnp.cumsum(starts) - 1  # group id of each update in sorted order
    groups = jnp.zeros(n, jnp.int32).at[order].set(group.astype(jnp.int32))
    segment = {
        "add": jax.ops.segment_sum,
        "mul": jax.ops.segment_prod,
        "min": jax.ops.segment_min,
        "max": jax.ops.segment_max,
    }[combine]
    combined = segment(values, groups, num_segments=n)
    return combined[groups].astype(dtype), keep & last


def _scatter_window(x, indices, updates, index_map, sizes, clip, combine):
    """One window of updates at one index vector: a dynamic update slice. In fill_or_drop
    mode a window not wholly inside the operand is dropped."""
    starts = [jnp.zeros((), jnp.int32)] * x.ndim
    for k, d in enumerate(index_map):
        starts[d] = indices[k].astype(jnp.int32)
    window = _reshaped(updates, tuple(sizes))
    if combine == "set":
        out = dynamic_update_slice(x, window, starts)
    else:
        old = dynamic_slice(x, starts, tuple(sizes))
        out = dynamic_update_slice(x, _combined(old, window, combine), starts)
    if clip:
        return out
    inside = jnp.all(
        jnp.stack([(s >= 0) & (s <= n - k) for s, n, k in zip(starts, x.shape, sizes)])
    )
    return elementwise.where(inside, out, x)


# -- DiskArray indices ------------------------------------------------------------------
#
# A gather or scatter whose indices are a DiskArray runs block by block of the indices'
# leading axis: a budget-sized block of index vectors is read into memory, and the gather
# (or scatter) at those in-memory indices runs as above (or in XLA, for an in-memory operand).
# A gather's blocks are joined along the output axis of the indices' leading axis (in memory
# when the result is small, else on disk); a scatter's blocks are applied one after the other
# (so a "set" at an index repeated across blocks keeps the last update, as within a block).
# Where the leading axis is a batching axis, the operand's matching axis is blocked with it.


def _index_block_rows(indices, out_row_elements: int, out_itemsize: int) -> int:
    """How many rows of the indices' leading axis one block reads: the block of indices and,
    where the results of a block are small enough to be in memory, their rows, in an eighth of
    the memory budget."""
    budget = _runtime.memory_budget() // 8
    row_bytes = int(np.prod(indices.shape[1:], dtype=np.int64)) * indices.dtype.itemsize
    out_bytes = out_row_elements * out_itemsize
    if out_bytes <= budget:
        row_bytes += out_bytes
    return max(1, budget // max(1, row_bytes))


def _index_block(indices, start: int, stop: int):
    """Rows [start, stop) of DiskArray indices, in memory."""
    if start == 0 and stop == indices.shape[0]:
        return materialize(indices)
    selection = ((start, 1, stop - start),) + tuple((0, 1, n) for n in indices.shape[1:])
    return apply(SliceInMemory, indices, selection=selection)


def _slice_axis(x, axis: int, start: int, stop: int):
    """x[start:stop] along `axis`: x on disk (a view or an in-memory slice, as `selected`) or in
    memory."""
    if not _is_disk_value(x):
        return jax.lax.slice_in_dim(x, start, stop, axis=axis)
    selection = tuple(
        (start, 1, stop - start) if d == axis else (0, 1, n) for d, n in enumerate(x.shape)
    )
    return selected(x, selection)


def _joined(parts, axis: int, shape):
    """Blocks joined along `axis`: in memory when the whole has at most IN_MEMORY_LIMIT
    elements, else a DiskArray."""
    if len(parts) == 1:
        part = parts[0]
        if _fits(shape):
            return materialize(part) if _is_disk_value(part) else part
        return part if _is_disk_value(part) else apply(FromInMemory, part)
    if _fits(shape):
        return jnp.concatenate([materialize(p) if _is_disk_value(p) else p for p in parts], axis)
    return apply(Concatenate, *parts, axis=axis)


def _on_disk_unless_small(part, total_shape):
    """A block of a result that will not fit in memory, written to disk as soon as it is made."""
    if _fits(total_shape) or _is_disk_value(part):
        return part
    return apply(FromInMemory, part)


def _gather_disk_indices(x, indices, dn, slice_sizes, mode, fill_value):
    indices = _disk_integer_indices("gather", indices)
    slice_sizes = tuple(int(s) for s in slice_sizes)

    def gather_at(operand, idx):
        return jax.lax.gather(operand, idx, dn, slice_sizes, mode=mode, fill_value=fill_value)

    n = indices.shape[0] if indices.ndim else 0
    out_aval = jax.eval_shape(
        gather_at,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        jax.ShapeDtypeStruct(indices.shape, indices.dtype),
    )
    if indices.ndim <= 1 or n == 0:  # one index vector (or none): a few elements
        return gather_at(x, materialize(indices))
    offset_dims = tuple(int(d) for d in dn.offset_dims)
    out_axis = next(d for d in range(len(out_aval.shape)) if d not in offset_dims)
    row = int(np.prod(out_aval.shape, dtype=np.int64)) // max(1, n)
    block = _index_block_rows(indices, row, np.dtype(out_aval.dtype).itemsize)
    batching = tuple(int(d) for d in dn.start_indices_batching_dims)
    operand_axis = int(dn.operand_batching_dims[batching.index(0)]) if 0 in batching else None
    if operand_axis is None and out_axis == 0 and not _is_disk_value(x):  # a table lookup
        if _fits(out_aval.shape):  # an in-memory result: its indices read whole, one gather
            return gather_at(x, materialize(indices))
        return search.gather_by_blocks(x, indices, dn, slice_sizes, mode, fill_value)
    parts = []
    for start in range(0, n, block):
        stop = min(n, start + block)
        operand = x if operand_axis is None else _slice_axis(x, operand_axis, start, stop)
        part = gather_at(operand, _index_block(indices, start, stop))
        parts.append(_on_disk_unless_small(part, out_aval.shape))
    return _joined(parts, out_axis, out_aval.shape)


_SCATTERS = {
    "set": jax.lax.scatter,
    "add": jax.lax.scatter_add,
    "mul": jax.lax.scatter_mul,
    "min": jax.lax.scatter_min,
    "max": jax.lax.scatter_max,
}


def _scatter_disk_indices(x, indices, updates, dn, mode, combine, unique):
    indices = _disk_integer_indices("scatter", indices)
    scatter_at = _SCATTERS[combine]

    def scattered(operand, idx, values):
        return scatter_at(operand, idx, values, dn, mode=mode, unique_indices=unique)

    n = indices.shape[0] if indices.ndim else 0
    if indices.ndim <= 1 or n == 0:
        return scattered(x, materialize(indices), updates)
    window_dims = tuple(int(d) for d in dn.update_window_dims)
    update_axis = next(d for d in range(updates.ndim) if d not in window_dims)
    block = _index_block_rows(
        indices,
        int(np.prod(updates.shape, dtype=np.int64)) // n,
        np.dtype(updates.dtype).itemsize,
    )
    batching = tuple(int(d) for d in dn.scatter_indices_batching_dims)
    operand_axis = int(dn.operand_batching_dims[batching.index(0)]) if 0 in batching else None
    if combine == "add" and search.adds_by_blocks(x, updates, update_axis, operand_axis):
        return search.scatter_add_by_blocks(x, indices, updates, dn, mode, unique)
    out = x
    for start in range(0, n, block):
        stop = min(n, start + block)
        idx = _index_block(indices, start, stop)
        values = _slice_axis(updates, update_axis, start, stop)
        if operand_axis is None:
            out = scattered(out, idx, values)
            continue
        part = scattered(_slice_axis(out, operand_axis, start, stop), idx, values)
        starts = [start if d == operand_axis else 0 for d in range(out.ndim)]
        out = jax.lax.dynamic_update_slice(out, part, starts)
    return out


def _disk_integer_indices(primitive, indices):
    if not jnp.issubdtype(indices.dtype, jnp.integer):  # worded as jax.lax's own check
        raise ValueError(
            f"indices must have an integer type (jax.lax.{primitive} at {describe(indices)})"
        )
    return indices
