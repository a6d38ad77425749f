"""The user-facing functions: they check and normalise operands, then apply one or more ops."""

from __future__ import annotations

import builtins
import numbers
import operator
import os

import jax
import jax.numpy as jnp
import numpy as np

from . import _engine, _runtime
from ._dtypes import dtype_code, storage_dtype
from ._jax import compat
from ._jax.diskarray import OPERATORS, DiskArray, DiskArrayTy
from ._jax.op import apply, describe
from .ops import (StopGradient, Abs, BroadcastTo, ReduceAxes, ReduceAxesDense, Add, Astype, Div, Equal, Exp, Expm1, Fill, FromDense, Gelu, Greater,
                  GreaterEqual, Less, LessEqual, Log, Log1p, Matmul, Maximum, Minimum, Mul, Neg,
                  NotEqual, Pow, Reduce, Relu, Reshape, Rows, Rsqrt, Sigmoid, Sign, Softplus, Sqrt,
                  Square, Sub, Tanh, ToDense, Transpose, Where)
from .ops import Concatenate, Slice, SliceDense
from .ops._elementwise import scalar_like
from .ops.matmul import matmul_type
from .ops.take import Take, TakeDense


def _is_scalar(v) -> bool:
    if isinstance(v, DiskArray):
        return False
    if isinstance(v, (numbers.Number, np.generic)) and not isinstance(v, bool):
        return True
    return isinstance(v, (np.ndarray, jax.Array)) and np.ndim(v) == 0


def _check_disk(fn: str, x) -> None:
    if not isinstance(x, DiskArray):
        raise TypeError(f"jask.{fn} expects a DiskArray, got {type(x).__name__}; wrap in-memory "
                        f"data with jask.DiskArray.from_numpy")


def _unsupported_operands(fn: str, *values):
    def kind(v):
        if isinstance(v, DiskArray) or _is_scalar(v) or hasattr(v, "shape"):
            try:
                return describe(v)
            except TypeError:
                pass
        return type(v).__name__
    raise TypeError(f"jask.{fn}: unsupported operands {' and '.join(kind(v) for v in values)}; "
                    f"Jask supports DiskArrays, in-memory arrays and scalars that broadcast "
                    f"together, with at least one DiskArray")


def _is_dense(v) -> bool:
    """An in-memory array (NumPy or JAX, traced or not) that is not a DiskArray."""
    return not isinstance(v, DiskArray) and (isinstance(v, (np.ndarray, jax.Array))
                                             or compat.is_tracer(v))


def _operands(fn: str, *values):
    """DiskArrays as they are; scalars and in-memory arrays as JAX arrays of the DiskArrays'
    dtype (they broadcast, NumPy-style)."""
    like = next((v for v in values if isinstance(v, DiskArray)), None)
    if like is None or not all(isinstance(v, DiskArray) or _is_scalar(v) or _is_dense(v) for v in values):
        _unsupported_operands(fn, *values)
    return [v if isinstance(v, DiskArray) else scalar_like(v, like) for v in values]


def _elementwise(op, fn: str):
    def apply_op(*values):
        return apply(op, *_operands(fn, *values))
    return apply_op


_add, _sub, _mul, _div = (_elementwise(op, fn) for op, fn in
                          ((Add, "add"), (Sub, "sub"), (Mul, "mul"), (Div, "divide")))


def add(x, y):
    """x + y, elementwise: two DiskArrays of one shape and dtype, or a DiskArray and a scalar.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> np.asarray(jask.add(x, x)).tolist()
    [0.0, 2.0, 4.0]
    """
    return _add(x, y)


def sub(x, y):
    """x - y, elementwise: two DiskArrays of one shape and dtype, or a DiskArray and a scalar.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> np.asarray(jask.sub(x, 1.0)).tolist()
    [-1.0, 0.0, 1.0]
    """
    return _sub(x, y)


def mul(x, y):
    """x * y, elementwise: two DiskArrays of one shape and dtype, or a DiskArray and a scalar.

    The scalar may be a Python or NumPy number or a 0-d JAX array, traced or
    not; the result keeps the DiskArray's dtype.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> np.asarray(0.5 * x).tolist()
    [0.0, 0.5, 1.0]
    """
    return _mul(x, y)


def divide(x, y):
    """x / y, elementwise: two DiskArrays of one shape and dtype, or a DiskArray and a scalar.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> np.asarray(x / 2).tolist()
    [0.0, 0.5, 1.0]
    """
    return _div(x, y)


def power(x, y):
    """x ** y, elementwise; y a scalar or a DiskArray of x's shape.

    >>> import numpy as np, jask
    >>> np.asarray(jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32)) ** 2).tolist()
    [0.0, 1.0, 4.0]
    """
    return apply(Pow, *_operands("power", x, y))


def maximum(x, y):
    """The larger of x and y, elementwise (NaN wins, as in jnp.maximum).

    >>> import numpy as np, jask
    >>> np.asarray(jask.maximum(jask.DiskArray.from_numpy(np.array([-1., 2.], np.float32)), 0.0)).tolist()
    [0.0, 2.0]
    """
    return apply(Maximum, *_operands("maximum", x, y))


def minimum(x, y):
    """The smaller of x and y, elementwise (NaN wins, as in jnp.minimum).

    >>> import numpy as np, jask
    >>> np.asarray(jask.minimum(jask.DiskArray.from_numpy(np.array([-1., 2.], np.float32)), 0.0)).tolist()
    [-1.0, 0.0]
    """
    return apply(Minimum, *_operands("minimum", x, y))


def clip(x, min=None, max=None):  # noqa: A002 - mirrors jnp.clip
    """x limited to [min, max], elementwise (either bound may be None).

    >>> import numpy as np, jask
    >>> np.asarray(jask.clip(jask.DiskArray.from_numpy(np.array([-2., 0.5, 3.], np.float32)), -1, 1)).tolist()
    [-1.0, 0.5, 1.0]
    """
    _check_disk("clip", x)
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


def where(condition, x, y):
    """x where condition is true, else y: each a DiskArray of one shape or a scalar.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.array([-1., 2.], np.float32))
    >>> np.asarray(jask.where(x > 0, x, 0.0)).tolist()
    [0.0, 2.0]
    """
    if isinstance(condition, (np.ndarray, jax.Array)) and np.size(condition) == 1:
        condition = jnp.reshape(condition, ())
    disks = [v for v in (x, y, condition) if isinstance(v, DiskArray)]
    if not disks:
        return _unsupported_operands("where", x, y)
    like = next((v for v in (x, y) if isinstance(v, DiskArray)), None)
    branches = [v if isinstance(v, DiskArray) or like is None else scalar_like(v, like) for v in (x, y)]
    branches = [jnp.asarray(v) if not isinstance(v, DiskArray) else v for v in branches]
    if not all(isinstance(v, DiskArray) or _is_scalar(v) or _is_dense(v) for v in (condition, *branches)):
        return _unsupported_operands("where", x, y)
    if not isinstance(condition, DiskArray):
        condition = jnp.asarray(condition, jnp.bool_)
    return apply(Where, condition, *branches)


def _unary(op, fn):
    def apply_op(x):
        _check_disk(fn, x)
        return apply(op, x)
    apply_op.__name__ = fn
    return apply_op


negative = _unary(Neg, "negative")
square = _unary(Square, "square")
sqrt = _unary(Sqrt, "sqrt")
rsqrt = _unary(Rsqrt, "rsqrt")
abs = _unary(Abs, "abs")  # noqa: A001
sign = _unary(Sign, "sign")
exp = _unary(Exp, "exp")
log = _unary(Log, "log")
tanh = _unary(Tanh, "tanh")
log1p = _unary(Log1p, "log1p")
expm1 = _unary(Expm1, "expm1")
sigmoid = _unary(Sigmoid, "sigmoid")
relu = _unary(Relu, "relu")
softplus = _unary(Softplus, "softplus")


def gelu(x, approximate: bool = True):
    """jax.nn.gelu (the tanh approximation, its default), elementwise.

    >>> import numpy as np, jask
    >>> round(float(np.asarray(jask.gelu(jask.DiskArray.from_numpy(np.ones(1, np.float32))))[0]), 4)
    0.8412
    """
    _check_disk("gelu", x)
    if not approximate:
        raise NotImplementedError("jask.gelu supports approximate=True only (jax.nn.gelu's default)")
    return apply(Gelu, x)


def _comparison(op, fn):
    def compare(x, y):
        return apply(op, *_operands(fn, x, y))
    compare.__name__ = fn
    return compare


less, less_equal, greater, greater_equal, equal, not_equal = (
    _comparison(op, fn) for op, fn in ((Less, "less"), (LessEqual, "less_equal"), (Greater, "greater"),
                                       (GreaterEqual, "greater_equal"), (Equal, "equal"),
                                       (NotEqual, "not_equal")))


def astype(x, dtype):
    """x converted to `dtype` (one of Jask's storage dtypes); x itself when it already has it.

    >>> import numpy as np, jask
    >>> jask.astype(jask.DiskArray.from_numpy(np.ones(2, np.float32)), "float16").dtype
    dtype('float16')
    """
    _check_disk("astype", x)
    dt = storage_dtype(dtype)
    return x if dt == x.dtype else apply(Astype, x, dtype=dt)


DENSE_LIMIT = 1 << 20
"""Reductions whose result has at most this many elements return an in-memory jax.Array;
larger results stay on disk as DiskArrays."""


def _axes(x, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = tuple(sorted({int(a) + x.ndim if a < 0 else int(a) for a in axes}))
    if len(normalized) != len(axes) or any(not 0 <= a < x.ndim for a in normalized):
        raise ValueError(f"invalid axis {axis!r} for a DiskArray of shape {x.shape}")
    return normalized


def _reduce(x, axis, keepdims, reduction):
    _check_disk(reduction, x)
    axes = _axes(x, axis)
    if axes == tuple(range(x.ndim)):
        result = apply(Reduce, x, instr="copy", reduction=reduction)
        return jnp.reshape(result, (1,) * x.ndim) if keepdims else result
    out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    dense = int(np.prod(out_shape, dtype=np.int64)) <= DENSE_LIMIT
    result = apply(ReduceAxesDense if dense else ReduceAxes, x, axes=axes, reduction=reduction)
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        result = jnp.reshape(result, kept) if dense else reshape(result, kept)
    return result


def sum(x, axis=None, keepdims: bool = False):  # noqa: A001 - mirrors jnp.sum
    """The sum over `axis` (all axes by default), like jnp.sum.

    Results with at most DENSE_LIMIT elements are jax.Arrays (a full sum is a
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


def mean(x, axis=None, keepdims: bool = False):
    """The mean over `axis` (all axes by default), like jnp.mean.

    >>> import numpy as np, jask
    >>> jask.mean(jask.DiskArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)), axis=1).tolist()
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
    return reshape(result, squeezed) if isinstance(result, DiskArray) else jnp.reshape(result, squeezed)


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
    >>> np.round(np.asarray(jask.log_softmax(jask.DiskArray.from_numpy(np.zeros((1, 2), np.float32)))), 4).tolist()
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


def broadcast_to(x, shape) -> DiskArray:
    """x (a DiskArray, an in-memory array or a scalar) broadcast to `shape`, as a DiskArray.

    >>> import numpy as np, jask
    >>> jask.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)).shape
    (2, 3)
    """
    shape = tuple(int(d) for d in shape)
    value = x if isinstance(x, DiskArray) else jnp.asarray(x)
    return apply(BroadcastTo, value, shape=shape)


def vdot(x, y):
    """sum(x * y) over two DiskArrays of one shape, as a 0-d jax.Array.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> float(jask.vdot(x, x))
    5.0
    """
    _check_disk("vdot", x)
    _check_disk("vdot", y)
    return apply(Reduce, x, y, instr="mul", reduction="sum")


def reshape(x, shape):
    """The same elements in C order with a new shape; shares x's file (no copy).

    >>> import numpy as np, jask
    >>> jask.reshape(jask.DiskArray.from_numpy(np.zeros(6, np.float32)), (2, 3)).shape
    (2, 3)
    """
    _check_disk("reshape", x)
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
    if shape.count(-1) == 1:
        known = int(np.prod([d for d in shape if d != -1]))
        shape = tuple(x.size // known if d == -1 and known else d for d in shape)
    return apply(Reshape, x, shape=shape)


def _matmul_operands(fn: str, a, b):
    """The two operands of a matrix product as DiskArrays. An in-memory array (a weight
    held by JAX) is written to disk with from_dense, whose backward rule brings its gradient
    back as a jax.Array; it must have the DiskArray's dtype."""
    disk = next((v for v in (a, b) if isinstance(v, DiskArray)), None)
    if disk is None or not all(isinstance(v, DiskArray) or _is_dense(v) for v in (a, b)):
        _unsupported_operands(fn, a, b)
    values = [v if isinstance(v, DiskArray) else jnp.asarray(v) for v in (a, b)]
    for v in values:
        if not isinstance(v, DiskArray) and np.dtype(v.dtype) != np.dtype(disk.dtype):
            raise TypeError(f"jask.{fn}: dtypes differ: {describe(values[0])} and {describe(values[1])}; "
                            f"convert one of them with .astype first")
    return [v if isinstance(v, DiskArray) else apply(FromDense, v) for v in values]


def _product(fn: str, x, y, trans_x: bool = False, trans_y: bool = False):
    """op(x) @ op(y) for DiskArrays of 2 or more axes (op transposes the last two axes where
    its flag is set). When y has no batch axes x's batch folds into its rows, a free reshape:
    one 2-D product instead of one per batch index."""
    out = matmul_type(x, y, trans_x, trans_y, fn=fn)
    if x.ndim > 2 and y.ndim == 2 and not trans_x:
        rows = reshape(x, (int(np.prod(x.shape[:-1], dtype=np.int64)), x.shape[-1]))
        return reshape(apply(Matmul, rows, y, trans_a=False, trans_b=trans_y), out.shape)
    return apply(Matmul, x, y, trans_a=trans_x, trans_b=trans_y)


def _matmul(fn: str, a, b):
    a, b = _matmul_operands(fn, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"jask.{fn}: operands need at least one axis, got {describe(a)} and {describe(b)}")
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise ValueError(f"jask.{fn}: vector lengths differ: {describe(a)} and {describe(b)}")
        return vdot(a, b)
    k_a, k_b = a.shape[-1], b.shape[-2 if b.ndim > 1 else 0]
    if 1 in (a.ndim, b.ndim) and k_a != k_b:  # named here: promoted vectors would show as matrices
        raise ValueError(f"jask.{fn}: contracted dimensions differ ({k_a} vs {k_b}) for "
                         f"{describe(a)} @ {describe(b)}")
    # numpy.matmul: a 1-D operand is a row vector on the left, a column on the right, and its
    # axis is dropped from the result.
    a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    out = _product(fn, a2, b2)
    if a.ndim == 1:
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:
        return reshape(out, out.shape[:-1])
    return out


def matmul(a, b):
    """The matrix product like jnp.matmul (and `a @ b`), with batch axes.

    Args:
      a, b: DiskArrays, or one DiskArray and one in-memory array of the same dtype (an
        in-memory weight gets its gradient back as a jax.Array). Axes before the last two
        are batch axes and broadcast as in NumPy; a 1-D operand is a row vector on the left
        and a column vector on the right, its axis dropped from the result.

    Returns:
      A DiskArray of shape ``broadcast(a.shape[:-2], b.shape[:-2]) + (m, n)``; for two 1-D
      operands their inner product, a 0-d jax.Array.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.ones((5, 2, 3), np.float32))
    >>> b = jask.DiskArray.from_numpy(np.ones((3, 4), np.float32))
    >>> jask.matmul(a, b).shape
    (5, 2, 4)
    """
    return _matmul("matmul", a, b)


def dot(a, b):
    """Matrix product like numpy.dot for 1-D and 2-D operands (see jask.matmul for batches).

    2-D @ 2-D and the matrix-vector cases give a DiskArray; 1-D . 1-D gives a
    0-d jax.Array. One operand may be an in-memory array, as in jask.matmul.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.ones((2, 3), np.float32))
    >>> b = jask.DiskArray.from_numpy(np.ones((3, 4), np.float32))
    >>> jask.dot(a, b).shape
    (2, 4)
    """
    if not any(isinstance(v, DiskArray) for v in (a, b)) or not all(
            isinstance(v, DiskArray) or _is_dense(v) for v in (a, b)):
        return _unsupported_operands("dot", a, b)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError(f"jask.dot supports 1-D and 2-D operands, got {describe(a)} and {describe(b)}; "
                         f"jask.matmul multiplies batches of matrices")
    return _matmul("dot", a, b)


def outer(a, b) -> DiskArray:
    """The outer product of two 1-D DiskArrays, a DiskArray of shape (len(a), len(b)).

    >>> import numpy as np, jask
    >>> v = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> np.asarray(jask.outer(v, v))[2].tolist()
    [0.0, 2.0, 4.0]
    """
    _check_disk("outer", a)
    _check_disk("outer", b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"jask.outer needs 1-D operands, got {describe(a)} and {describe(b)}")
    return apply(Matmul, reshape(a, (a.shape[0], 1)), reshape(b, (1, b.shape[0])), trans_a=False,
                 trans_b=False)


def einsum(spec: str, *operands):
    """Einsum of one or two operands, the contractions dense layers and attention need.

    One operand: transposes and sums. Two operands: products with at most one contracted
    index, every other index kept in the output; indices in both operands and the output
    are batch indices (as are extra indices of one operand, broadcast), so "ij,jk->ik",
    "bij,bjk->bik", "bik,bjk->bij", "bij,jk->bik", "ij,bjk->bik" and "bi,bi->b" all work.
    Products run as one out-of-core (batched) matmul with transposes folded into its flags;
    an operand is transposed on disk only when its batch indices do not lead. Without an
    index private to either operand ("bi,bi->b") the product is elementwise, then summed.
    One of two operands may be an in-memory array, as in jask.matmul.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.ones((4, 2, 3), np.float32))
    >>> jask.einsum("bij,bkj->bik", a, a).shape
    (4, 2, 2)
    """
    lhs, arrow, out = spec.replace(" ", "").partition("->")
    inputs = lhs.split(",")
    if not arrow or len(inputs) != len(operands) or len(inputs) not in (1, 2):
        raise NotImplementedError(f"jask.einsum supports 'in->out' with one or two operands, got {spec!r}")
    if len(operands) == 1:
        _check_disk("einsum", operands[0])
    else:
        operands = _matmul_operands("einsum", *operands)
    for x, idx in zip(operands, inputs):
        if x.ndim != len(idx) or len(set(idx)) != len(idx):
            raise ValueError(f"jask.einsum: {idx!r} does not index {describe(x)} once per axis")
    if len(operands) == 1:
        return _einsum_single(spec, inputs[0], out, operands[0])
    return _einsum_pair(spec, inputs, out, *operands)


def _einsum_single(spec, idx, out, x):
    if len(set(out)) != len(out) or not set(out) <= set(idx):
        raise NotImplementedError(f"jask.einsum does not support {spec!r}")
    summed = tuple(i for i, c in enumerate(idx) if c not in out)
    result = sum(x, axis=summed) if summed else x
    kept = [c for c in idx if c in out]
    perm = tuple(kept.index(c) for c in out)
    if perm == tuple(range(len(perm))):
        return result
    return transpose(result, perm) if isinstance(result, DiskArray) else jnp.transpose(result, perm)


def _einsum_pair(spec, inputs, out, a, b):
    ia, ib = inputs
    contracted = [c for c in ia if c in ib and c not in out]
    if len(contracted) > 1 or len(set(out)) != len(out) or set(out) != (set(ia) | set(ib)) - set(contracted):
        raise NotImplementedError(f"jask.einsum does not support {spec!r}: it handles products of two "
                                  f"operands with at most one contracted index and every other index "
                                  f"kept in the output")
    c = contracted[0] if contracted else None
    # An operand's free (matrix) index: its last index the other operand lacks; the output's
    # other indices are batch indices.
    def free_index(x, y):
        return ([d for d in x if d not in y] or [None])[-1]
    free_a, free_b = free_index(ia, ib), free_index(ib, ia)
    if free_a is None and free_b is None:
        return _einsum_elementwise(out, c, (a, ia), (b, ib))
    if free_a is not None and free_b is not None and out.index(free_b) < out.index(free_a):
        (a, ia, free_a), (b, ib, free_b) = (b, ib, free_b), (a, ia, free_a)  # (AB)^T = B^T A^T
    batch = [d for d in out if d not in (free_a, free_b)]
    x, trans_x = _einsum_matrices(a, ia, batch, free_a, c)
    y, trans_y = _einsum_matrices(b, ib, batch, c, free_b)
    product = _product("einsum", x, y, trans_x, trans_y)
    frees = [(d, dict(zip(ix, v.shape))[d]) for d, ix, v in ((free_a, ia, a), (free_b, ib, b)) if d]
    order = batch + [d for d, _ in frees]
    result = reshape(product, product.shape[:-2] + tuple(n for _, n in frees))
    perm = tuple(order.index(d) for d in out)
    return result if perm == tuple(range(len(perm))) else transpose(result, perm)


def _einsum_matrices(x, idx, batch, row, col):
    """x (indexed by `idx`) as a stack of (row, col) matrices for a product, and whether they
    are stored transposed. Its batch indices lead, in `batch` order (moved there on disk if
    they do not), with size-1 axes for batch indices it lacks unless it has none; a missing
    row or column index is a size-1 axis."""
    sizes = dict(zip(idx, x.shape))
    own_batch = [d for d in batch if d in idx]
    rest = [d for d in idx if d not in own_batch]  # row and col, those present, as stored
    perm = tuple(idx.index(d) for d in own_batch + rest)
    if perm != tuple(range(len(perm))):
        x = transpose(x, perm)
    trans = rest == [col, row]
    matrix = tuple(sizes[d] for d in rest) if len(rest) == 2 else tuple(
        sizes[d] if d in rest else 1 for d in (row, col))
    stack = tuple(sizes.get(d, 1) for d in batch) if own_batch else ()
    return (x if x.shape == stack + matrix else reshape(x, stack + matrix)), trans


def _einsum_elementwise(out, c, *operands):
    """A product with no free index: each operand aligned to out's indices (then c's) with
    size-1 axes where it lacks one, multiplied elementwise and summed over c."""
    if not out:
        return vdot(*(x for x, _ in operands))
    order = list(out) + ([c] if c else [])
    aligned = []
    for x, idx in operands:
        sizes = dict(zip(idx, x.shape))
        perm = tuple(sorted(range(len(idx)), key=lambda i: order.index(idx[i])))
        x = x if perm == tuple(range(len(perm))) else transpose(x, perm)
        shape = tuple(sizes.get(d, 1) for d in order)
        aligned.append(x if x.shape == shape else reshape(x, shape))
    product = aligned[0] * aligned[1]
    return sum(product, axis=-1) if c else product


def transpose(x, *axes):
    """Permutes the axes of x (reverses them by default), like numpy.transpose.

    >>> import numpy as np, jask
    >>> jask.transpose(jask.DiskArray.from_numpy(np.zeros((2, 3, 4), np.float32)), (1, 0, 2)).shape
    (3, 2, 4)
    """
    _check_disk("transpose", x)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    if len(axes) == 1 and axes[0] is None:
        axes = ()
    perm = tuple(int(a) % x.ndim if x.ndim else int(a) for a in axes) if axes else tuple(reversed(range(x.ndim)))
    return apply(Transpose, x, perm=perm)


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
    _check_disk("rows", x)
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
      DENSE_LIMIT elements, else a DiskArray. Differentiable with respect to x (the gradient
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
    _check_disk("take", x)
    if x.ndim == 0:
        raise ValueError(f"jask.take: {describe(x)} has no axis to take from")
    if axis is None or not -x.ndim <= int(axis) < x.ndim:
        raise ValueError(f"jask.take: invalid axis {axis!r} for {describe(x)}")
    if int(axis) % x.ndim != 0:
        raise NotImplementedError(f"jask.take supports axis=0 only, got axis={axis} for {describe(x)}")
    idx = _row_indices("take", indices, x.shape[0])
    scalar = idx.ndim == 0
    idx = idx.reshape(1) if scalar else idx
    numel = int(np.prod(idx.shape + x.shape[1:], dtype=np.int64))
    dense = numel <= DENSE_LIMIT
    out = apply(TakeDense if dense else Take, x, idx)
    if scalar:
        return out[0] if dense else reshape(out, x.shape[1:])
    return out


def _row_indices(fn: str, indices, n: int):
    """`indices` as an int32 array (int64 for axes longer than int32 can count); concrete
    indices are checked against [-n, n) and stay concrete."""
    if isinstance(indices, (list, tuple)):
        concrete = not any(compat.is_tracer(i) for i in indices)
        indices = np.asarray(indices, np.int64) if concrete else jnp.asarray(indices)
    if not (isinstance(indices, (np.ndarray, np.integer, jax.Array, int)) or compat.is_tracer(indices)):
        raise TypeError(f"jask.{fn}: indices must be an integer array, got {type(indices).__name__}")
    dtype = np.dtype(indices.dtype) if hasattr(indices, "dtype") else np.dtype(np.int64)
    if dtype == np.bool_ or not np.issubdtype(dtype, np.integer):
        raise TypeError(f"jask.{fn}: indices must be integers, got {dtype.name}; boolean masks "
                        f"are not supported")
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
        raise IndexError(f"jask.{fn}: index {values[bad].flat[0]} is out of bounds for axis 0 "
                         f"with size {n}")
    return values.astype(np.int64 if wide else np.int32)


def getitem(x, key):
    """x[key]: NumPy basic indexing on any axes, plus integer arrays on the leading axis.

    Keys: ints (negative count from the end), slices with any nonzero step, Ellipsis and
    None, in any combination (``x[5, :, 1:4]``, ``x[..., 2:9:3]``, ``x[None, ::-1]``). An
    integer array or list of ints as the first key gathers rows (`take`), and the keys after
    it then index the gathered rows. A traced scalar int as the first key selects a row
    inside jit (clamped to the array, as in lax.dynamic_slice).

    Results with at most DENSE_LIMIT elements are jax.Arrays; larger ones are DiskArrays: a
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
    if size <= DENSE_LIMIT:
        (start, step, count), rest = selection[0], selection[1:]
        if step == 1 and all(s == (0, 1, n) for s, n in zip(rest, x.shape[1:])):
            result = rows(x, start, count)  # whole leading rows: one read
        else:
            result = apply(SliceDense, x, selection=selection)
        return result if result.shape == shape else jnp.reshape(result, shape)
    if all(s == (0, 1, n) for s, n in zip(selection, x.shape)):
        result = x  # everything: x itself
    else:
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
        raise NotImplementedError("boolean mask indices are not supported: a mask selects a "
                                  "data-dependent number of elements, so the result has no static shape")


def _selection(x, key):
    """(start, step, count) per axis of x, and the shape of x[key] (an int drops its axis,
    None adds one)."""
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    indexed = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if indexed > x.ndim:
        raise IndexError(f"too many indices for a DiskArray of shape {x.shape}: {indexed} were "
                         f"indexed, it has {x.ndim} axes")
    if not any(k is Ellipsis for k in key):
        key = (*key, Ellipsis)
    selection, shape, axis = [], [], 0
    for k in key:
        if k is Ellipsis:
            for n in x.shape[axis:axis + x.ndim - indexed]:
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
        raise TypeError("a slice with traced bounds has no static size; use "
                        "jask.rows(x, start, count) or jax.lax.dynamic_slice_in_dim(x, start, count)")
    try:  # ints, NumPy and concrete JAX integer scalars
        k = slice(*(None if v is None else operator.index(v) for v in bounds))
    except TypeError:
        raise TypeError(f"slice bounds must be integers or None, got {k!r} on axis {axis}") from None
    if k.step == 0:
        raise ValueError(f"slice step cannot be zero (axis {axis})")
    start, stop, step = k.indices(n)
    count = len(range(start, stop, step))
    return (start, step, count) if count else (0, 1, 0)


def _int_index(k, n: int, axis: int) -> int:
    _reject_mask(k)
    if compat.is_tracer(k):
        raise NotImplementedError(f"a traced index is supported as the first index only (x[i], "
                                  f"jask.rows); got one for axis {axis}")
    if isinstance(k, (np.ndarray, jax.Array)) and np.ndim(k) == 0 and np.issubdtype(k.dtype, np.integer):
        k = int(k)
    if isinstance(k, (np.ndarray, jax.Array, list)):
        raise NotImplementedError(f"integer-array indices are supported as the first index only "
                                  f"(x[idx] gathers rows); got one for axis {axis}")
    if not isinstance(k, (numbers.Integral, np.integer)):
        raise TypeError(f"DiskArray indices must be integers, slices, Ellipsis, None or an integer "
                        f"array of rows; got {type(k).__name__} for axis {axis}")
    i = int(k) + n if k < 0 else int(k)
    if not 0 <= i < n:
        raise IndexError(f"index {int(k)} is out of bounds for axis {axis} with size {n}")
    return i


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
        raise ValueError(f"jask.stack: all arrays must have the same shape, got "
                         f"{', '.join(str(tuple(p.shape)) for p in parts)}")
    axis = _join_axis("stack", axis, parts[0].ndim + 1)
    expanded = [reshape(p, (*p.shape[:axis], 1, *p.shape[axis:])) if isinstance(p, DiskArray)
                else jnp.expand_dims(p, axis) for p in parts]
    return apply(Concatenate, *expanded, axis=axis)


def _joined_operands(fn: str, arrays):
    """DiskArrays as they are, in-memory operands as JAX arrays; one dtype for all."""
    if isinstance(arrays, DiskArray) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"jask.{fn} expects a list or tuple of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"jask.{fn} needs at least one array")
    dtypes = [np.dtype(a.dtype) if hasattr(a, "dtype") else np.asarray(a).dtype for a in arrays]
    if len(set(dtypes)) > 1:
        raise TypeError(f"jask.{fn}: dtypes differ: {', '.join(d.name for d in dtypes)}; convert "
                        f"the operands to one dtype first")
    return [a if isinstance(a, DiskArray) else jnp.asarray(a) for a in arrays]


def _join_axis(fn: str, axis, ndim: int) -> int:
    if not isinstance(axis, (numbers.Integral, np.integer)) or not -ndim <= int(axis) < ndim:
        raise ValueError(f"jask.{fn}: axis {axis!r} is out of bounds for a result of {ndim} axes")
    return int(axis) % ndim


def materialize(x) -> jax.Array:
    """Reads a whole DiskArray into an in-memory jax.Array (the explicit bridge).

    >>> import numpy as np, jask
    >>> jask.materialize(jask.DiskArray.from_numpy(np.ones(2, np.float32))).tolist()
    [1.0, 1.0]
    """
    _check_disk("materialize", x)
    return apply(ToDense, x)


def full(shape, fill_value, dtype="float32") -> DiskArray:
    """A new DiskArray of `shape` filled with `fill_value`.

    >>> import jask
    >>> float(jask.sum(jask.full((2, 2), 3.0)))
    12.0
    """
    dt = storage_dtype(dtype)
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"jask.full: negative dimension in shape {shape}")
    value = jnp.asarray(fill_value, dtype=jax.dtypes.canonicalize_dtype(dt))
    return apply(Fill, value, shape=shape, dtype=dt)


def zeros(shape, dtype="float32") -> DiskArray:
    """A new DiskArray of zeros (a sparse file: nothing is written).

    >>> import jask
    >>> jask.zeros((3, 2)).shape
    (3, 2)
    """
    return full(shape, 0, dtype)


def from_numpy(array) -> DiskArray:
    """Writes an in-memory array to a new scratch DiskArray (see DiskArray.from_numpy)."""
    if isinstance(array, DiskArray):
        raise TypeError("jask.DiskArray.from_numpy: the argument is already a DiskArray")
    if compat.is_tracer(array):
        return apply(FromDense, array.astype(storage_dtype(array.dtype)))
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
        raise ValueError(f"opening a raw file needs both shape= and dtype= (got shape={shape!r}, "
                         f"dtype={dtype!r}); a .npy file needs neither")
    if shape is None:
        h = _engine.open(path, "npy", writable)
    else:
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
        if offset < 0:
            raise ValueError(f"offset must be non-negative, got {offset}")
        h = _engine.open(path, "raw", writable, dtype_code(dtype), list(shape), int(offset))
    code, shp, *_ = _engine.info(h)
    from ._dtypes import dtype_from_code
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
        raise TypeError("DiskArray.update_() writes files and cannot run inside jax.jit or "
                        "jax.grad; call it on the concrete result, outside the transformed function")
    _check_disk("update_", target)
    if not isinstance(new, DiskArray):
        raise TypeError(f"DiskArray.update_ expects a DiskArray, got {type(new).__name__}")
    if compat.is_tracer(new._handle):
        raise TypeError("DiskArray.update_() cannot take a traced value; call it outside jax.jit")
    if new.shape != target.shape or new.dtype != target.dtype:
        raise ValueError(f"update_: the new value {describe(new)} does not match the array "
                         f"{describe(target)}; shape and dtype must be equal")
    _runtime.ensure_scratch()
    if new.handle != target.handle:
        _engine.copy_into(target.handle, new.handle)
    return target


def zeros_like(x, dtype=None) -> DiskArray:
    """A new DiskArray of zeros with x's shape (and dtype, unless given)."""
    return zeros(x.shape, x.dtype if dtype is None else dtype)


def full_like(x, fill_value, dtype=None) -> DiskArray:
    """A new DiskArray of x's shape (and dtype, unless given) filled with `fill_value`."""
    return full(x.shape, fill_value, x.dtype if dtype is None else dtype)


def ones_like(x, dtype=None) -> DiskArray:
    """A new DiskArray of ones with x's shape (and dtype, unless given)."""
    return full_like(x, 1, dtype)


OPERATORS.update(
    add=add, sub=sub, mul=mul, divide=divide, power=power, negative=negative, abs=abs, dot=dot,
    transpose=transpose, sum=sum, zeros=zeros, from_numpy=from_numpy, open=open_array,
    update_=update_, astype=astype, matmul=matmul, getitem=getitem, less=less, less_equal=less_equal, greater=greater,
    greater_equal=greater_equal, equal=equal, not_equal=not_equal,
)
