"""Shape functions: reshape, transpose, broadcast_to, concatenate, stack."""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np

from .._jax.diskarray import DiskArray
from .._jax.op import apply
from ..ops import BroadcastTo, Concatenate, Reshape, Transpose
from .operands import check_disk


def broadcast_to(x, shape) -> DiskArray:
    """x (a DiskArray, an in-memory array or a scalar) broadcast to `shape`, as a DiskArray.

    >>> import numpy as np, jask
    >>> jask.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)).shape
    (2, 3)
    """
    shape = tuple(int(d) for d in shape)
    value = x if isinstance(x, DiskArray) else jnp.asarray(x)
    return apply(BroadcastTo, value, shape=shape)


def reshape(x, shape):
    """The same elements in C order with a new shape; shares x's file (no copy).

    >>> import numpy as np, jask
    >>> jask.reshape(jask.DiskArray.from_numpy(np.zeros(6, np.float32)), (2, 3)).shape
    (2, 3)
    """
    check_disk("reshape", x)
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
    if shape.count(-1) == 1:
        known = int(np.prod([d for d in shape if d != -1]))
        shape = tuple(x.size // known if d == -1 and known else d for d in shape)
    return apply(Reshape, x, shape=shape)


def transpose(x, *axes):
    """Permutes the axes of x (reverses them by default), like numpy.transpose.

    >>> import numpy as np, jask
    >>> jask.transpose(jask.DiskArray.from_numpy(np.zeros((2, 3, 4), np.float32)), (1, 0, 2)).shape
    (3, 2, 4)
    """
    check_disk("transpose", x)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    if len(axes) == 1 and axes[0] is None:
        axes = ()
    if axes:
        perm = tuple(int(a) % x.ndim if x.ndim else int(a) for a in axes)
    else:
        perm = tuple(reversed(range(x.ndim)))
    return apply(Transpose, x, perm=perm)


def concatenate(arrays, axis: int = 0) -> DiskArray:
    """Arrays joined along an existing axis, like jnp.concatenate, as a new DiskArray.

    Args:
      arrays: a sequence of DiskArrays and in-memory arrays (NumPy or JAX, traced or not) of
        one dtype and rank, with equal sizes on every axis but `axis`.
      axis: the axis to join along; negative counts from the end.

    Returns:
      A DiskArray, written by one streamed pass (along axis 0, sequential copies).
      Differentiable: each operand's cotangent is its slice of the result's (a DiskArray for
      a DiskArray operand, a jax.Array for an in-memory one).

    Raises:
      TypeError: the dtypes differ. ValueError: no operands, 0-d operands, or shapes that
      differ off `axis`.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.zeros((2, 3), np.float32))
    >>> jask.concatenate([a, np.ones((1, 3), np.float32)]).shape
    (3, 3)
    """
    parts = _joined_operands("concatenate", arrays)
    if parts[0].ndim == 0:
        raise ValueError("jask.concatenate: zero-dimensional arrays cannot be concatenated")
    return apply(Concatenate, *parts, axis=_join_axis("concatenate", axis, parts[0].ndim))


def stack(arrays, axis: int = 0) -> DiskArray:
    """Arrays of one shape joined along a new axis, like jnp.stack, as a new DiskArray.

    Args:
      arrays: a sequence of DiskArrays and in-memory arrays of one shape and dtype.
      axis: where the new axis goes in the result; negative counts from the end.

    Returns:
      A DiskArray; differentiable as `concatenate`.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.zeros(3, np.float32))
    >>> jask.stack([a, a, a], axis=1).shape
    (3, 3)
    """
    parts = _joined_operands("stack", arrays)
    shapes = {tuple(p.shape) for p in parts}
    if len(shapes) > 1:
        raise ValueError(
            f"jask.stack: all arrays must have the same shape, got "
            f"{', '.join(str(tuple(p.shape)) for p in parts)}"
        )
    axis = _join_axis("stack", axis, parts[0].ndim + 1)
    expanded = [
        reshape(p, (*p.shape[:axis], 1, *p.shape[axis:]))
        if isinstance(p, DiskArray)
        else jnp.expand_dims(p, axis)
        for p in parts
    ]
    return apply(Concatenate, *expanded, axis=axis)


def _joined_operands(fn: str, arrays):
    """DiskArrays as they are, in-memory operands as JAX arrays; one dtype for all."""
    if isinstance(arrays, DiskArray) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"jask.{fn} expects a list or tuple of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"jask.{fn} needs at least one array")
    dtypes = [np.dtype(a.dtype) if hasattr(a, "dtype") else np.asarray(a).dtype for a in arrays]
    if len(set(dtypes)) > 1:
        raise TypeError(
            f"jask.{fn}: dtypes differ: {', '.join(d.name for d in dtypes)}; convert "
            f"the operands to one dtype first"
        )
    return [a if isinstance(a, DiskArray) else jnp.asarray(a) for a in arrays]


def _join_axis(fn: str, axis, ndim: int) -> int:
    if not isinstance(axis, (numbers.Integral, np.integer)) or not -ndim <= int(axis) < ndim:
        raise ValueError(f"jask.{fn}: axis {axis!r} is out of bounds for a result of {ndim} axes")
    return int(axis) % ndim
