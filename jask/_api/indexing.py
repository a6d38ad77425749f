"""Indexing: x[key], rows, take."""

from __future__ import annotations

import builtins
import numbers
import operator

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import compat
from .._jax.op import apply, describe
from ..ops import Rows, Slice, SliceInMemory, Take, TakeInMemory
from .io import materialize
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
    and x[indices].

    Args:
      x: a DiskArray with at least one axis.
      indices: an integer array of any shape (NumPy or JAX, concrete or traced inside jit,
        e.g. ``jax.random.randint(key, (256,), 0, n)``), or a list of ints. Duplicates are
        allowed; negative indices count from the end.
      axis: 0 (other axes are not supported yet).

    Returns:
      An array of shape ``indices.shape + x.shape[1:]``: a jax.Array when it has at most
      IN_MEMORY_LIMIT elements, else a DiskArray. Differentiable with respect to x (the gradient
      scatter-adds the cotangent rows, so duplicate indices accumulate).

    Raises:
      IndexError: a concrete index outside [-n, n) for n = x.shape[0]. Traced indices
        cannot be checked: one still out of range after wrapping a negative index once is
        clamped to [0, n - 1], as jnp does for x[idx] gathers.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(10, dtype=np.float32).reshape(5, 2))
    >>> jask.take(x, np.array([4, 0, -1])).tolist()
    [[8.0, 9.0], [0.0, 1.0], [8.0, 9.0]]
    """
    check_disk("take", x)
    if x.ndim == 0:
        raise ValueError(f"jask.take: {describe(x)} has no axis to take from")
    if axis is None or not -x.ndim <= int(axis) < x.ndim:
        raise ValueError(f"jask.take: invalid axis {axis!r} for {describe(x)}")
    if int(axis) % x.ndim != 0:
        raise NotImplementedError(
            f"jask.take supports axis=0 only, got axis={axis} for {describe(x)}"
        )
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
    """x[key]: NumPy basic indexing on any axes, plus integer arrays on the leading axis.

    Keys: ints (negative count from the end), slices with any nonzero step, Ellipsis and
    None, in any combination (``x[5, :, 1:4]``, ``x[..., 2:9:3]``, ``x[None, ::-1]``). An
    integer array or list of ints as the first key gathers rows (`take`), and the keys after
    it then index the gathered rows. A traced scalar int as the first key selects a row
    inside jit (clamped to the array, as in lax.dynamic_slice).

    Results with at most IN_MEMORY_LIMIT elements are jax.Arrays; larger ones are DiskArrays: a
    view of x's file (no copy) when the selected elements are one contiguous range
    (``x[i:j]``, ``x[i]``), a streamed copy otherwise. Differentiable with respect to x.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    >>> x[:, 1].tolist(), x[1:, ::-2].tolist()
    ([1.0, 5.0, 9.0], [[7.0, 5.0], [11.0, 9.0]])
    """
    key = key if isinstance(key, tuple) else (key,)
    if key and _is_index_array(key[0]):
        _reject_mask(np.asarray(key[0]) if isinstance(key[0], list) else key[0])
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
