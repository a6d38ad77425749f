"""Reductions: sum, max, min, prod, mean, var, logsumexp, softmax, and stop_gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax.diskarray import DiskArray
from .._jax.op import apply
from ..ops import Reduce, ReduceAxes, ReduceAxesInMemory, StopGradient
from ..ops.reduce import filled
from .elementwise import exp, log
from .operands import check_disk, in_memory_limit
from .shape import reshape


def _axes(x, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = tuple(sorted({int(a) + x.ndim if a < 0 else int(a) for a in axes}))
    if len(normalized) != len(axes) or any(not 0 <= a < x.ndim for a in normalized):
        raise ValueError(f"invalid axis {axis!r} for a DiskArray of shape {x.shape}")
    return normalized


def _reduce(x, axis, keepdims, reduction):
    check_disk(reduction, x)
    axes = _axes(x, axis)
    result = reduce_axes(x, axes, reduction)
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        result = (
            reshape(result, kept) if isinstance(result, DiskArray) else jnp.reshape(result, kept)
        )
    return result


def reduce_axes(x, axes: tuple[int, ...], reduction: str):
    """lax.reduce_<reduction> of x over `axes` (sorted, distinct), in x's dtype: a jax.Array
    when the result has at most IN_MEMORY_LIMIT elements, else a DiskArray.

    Floats fold in double; integers fold exactly in int64, sums and products wrapping to the
    dtype's width as XLA's do; NaN propagates through max and min; an empty axis gives the
    reduction's identity (-inf for max, the dtype's smallest value for an integer max)."""
    if not axes:
        return x
    out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    small = int(np.prod(out_shape, dtype=np.int64)) <= in_memory_limit()
    if any(x.shape[a] == 0 for a in axes):
        identity = _identity(reduction, x.dtype)
        if small:
            return jnp.full(out_shape, identity, x.dtype)
        return filled(jnp.asarray(identity, x.dtype), out_shape, x.dtype)
    # A full reduction of floats is a 0-d result of the engine (fusable into the program that
    # computes x; it crosses as a double); integers go through the axis reducer, exact.
    if axes == tuple(range(x.ndim)) and jnp.issubdtype(x.dtype, jnp.floating):
        return apply(Reduce, x, instr="copy", reduction=reduction)
    op = ReduceAxesInMemory if small else ReduceAxes
    return apply(op, x, axes=axes, reduction=reduction)


def _identity(reduction: str, dtype):
    """The identity of lax.reduce_<reduction> in `dtype` (what an empty axis reduces to)."""
    if reduction == "sum":
        return 0
    if reduction == "prod":
        return 1
    low, high = (
        (False, True)
        if np.dtype(dtype) == np.bool_
        else (jnp.iinfo(dtype).min, jnp.iinfo(dtype).max)
        if jnp.issubdtype(dtype, jnp.integer)
        else (-np.inf, np.inf)
    )
    return low if reduction == "max" else high


def sum(x, axis=None, keepdims: bool = False):  # noqa: A001 - mirrors jnp.sum
    """The sum over `axis` (all axes by default), like jnp.sum.

    Results with at most IN_MEMORY_LIMIT elements are jax.Arrays (a full sum is a
    0-d jax.Array, so jax.grad accepts it); larger ones are DiskArrays.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> float(jask.sum(x)), jask.sum(x, axis=0).tolist()
    (15.0, [3.0, 5.0, 7.0])
    """
    return _reduce(x, axis, keepdims, "sum")


def max(x, axis=None, keepdims: bool = False):  # noqa: A001 - mirrors jnp.max
    """The largest element over `axis` (all axes by default), like jnp.max.

    >>> import numpy as np, jask
    >>> float(jask.max(jask.DiskArray.from_numpy(np.arange(4, dtype=np.float32))))
    3.0
    """
    return _reduce(x, axis, keepdims, "max")


def min(x, axis=None, keepdims: bool = False):  # noqa: A001 - mirrors jnp.min
    """The smallest element over `axis` (all axes by default), like jnp.min.

    >>> import numpy as np, jask
    >>> float(jask.min(jask.DiskArray.from_numpy(np.arange(4, dtype=np.float32))))
    0.0
    """
    return _reduce(x, axis, keepdims, "min")


def prod(x, axis=None, keepdims: bool = False):
    """The product over `axis` (all axes by default), like jnp.prod; its gradient is exact where
    elements are zero (the product of the other elements, not prod / x).

    >>> import numpy as np, jask
    >>> float(jask.prod(jask.DiskArray.from_numpy(np.arange(1, 5, dtype=np.float32))))
    24.0
    """
    return _reduce(x, axis, keepdims, "prod")


def mean(x, axis=None, keepdims: bool = False):
    """The mean over `axis` (all axes by default), like jnp.mean.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> jask.mean(x, axis=1).tolist()
    [1.0, 4.0]
    """
    count = int(np.prod([x.shape[a] for a in _axes(x, axis)], dtype=np.int64))
    return sum(x, axis, keepdims) / count


def var(x, axis=None, keepdims: bool = False):
    """The variance over `axis` (all axes by default), like jnp.var: mean((x - mean(x))**2),
    two passes for accuracy.

    >>> import numpy as np, jask
    >>> float(jask.var(jask.DiskArray.from_numpy(np.array([1., 2., 3., 4.], np.float32))))
    1.25
    """
    centered = x - mean(x, axis, keepdims=True)
    return mean(centered * centered, axis, keepdims)


def logsumexp(x, axis=None, keepdims: bool = False):
    """log(sum(exp(x))) over `axis`, computed stably (max subtracted first).

    >>> import numpy as np, jask
    >>> round(float(jask.logsumexp(jask.DiskArray.from_numpy(np.zeros(4, np.float32)))), 4)
    1.3863
    """
    top = stop_gradient(max(x, axis, keepdims=True))
    total = sum(exp(x - top), axis, keepdims=True)
    result = log(total) + top if isinstance(total, DiskArray) else jnp.log(total) + top
    if keepdims:
        return result
    squeezed = tuple(d for i, d in enumerate(x.shape) if i not in _axes(x, axis))
    if isinstance(result, DiskArray):
        return reshape(result, squeezed)
    return jnp.reshape(result, squeezed)


def stop_gradient(x):
    """x itself, treated as a constant by differentiation (like jax.lax.stop_gradient); a
    DiskArray comes back as a new handle on the same file, with no copy.

    >>> import jax, numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.ones(3, np.float32))
    >>> float(jax.grad(lambda x: jask.sum(jask.stop_gradient(x) * x))(x).sum())
    3.0
    """
    if isinstance(x, DiskArray):
        return apply(StopGradient, x)
    return jax.lax.stop_gradient(x)


def log_softmax(x, axis=-1):
    """x - logsumexp(x, axis, keepdims=True), like jax.nn.log_softmax.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.zeros((1, 2), np.float32))
    >>> np.round(np.asarray(jask.log_softmax(x)), 4).tolist()
    [[-0.6931, -0.6931]]
    """
    return x - logsumexp(x, axis, keepdims=True)


def softmax(x, axis=-1):
    """exp(log_softmax(x, axis)), like jax.nn.softmax.

    >>> import numpy as np, jask
    >>> np.asarray(jask.softmax(jask.DiskArray.from_numpy(np.zeros((1, 2), np.float32)))).tolist()
    [[0.5, 0.5]]
    """
    return exp(log_softmax(x, axis))
