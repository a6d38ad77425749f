"""The user-facing functions: they check and normalise operands, then apply one or more ops."""

from __future__ import annotations

import builtins
import numbers
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
from .ops._elementwise import scalar_like


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


def dot(a, b):
    """Matrix product like numpy.dot for 1-D and 2-D DiskArrays.

    2-D @ 2-D and the matrix-vector cases give a DiskArray; 1-D . 1-D gives a
    0-d jax.Array.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.ones((2, 3), np.float32))
    >>> b = jask.DiskArray.from_numpy(np.ones((3, 4), np.float32))
    >>> jask.dot(a, b).shape
    (2, 4)
    """
    if not (isinstance(a, DiskArray) and isinstance(b, DiskArray)):
        return _unsupported_operands("dot", a, b)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError(f"jask.dot supports 1-D and 2-D operands, got {describe(a)} and {describe(b)}")
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise ValueError(f"jask.dot: vector lengths differ: {describe(a)} and {describe(b)}")
        return vdot(a, b)
    a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    out = apply(Matmul, a2, b2, trans_a=False, trans_b=False)
    if a.ndim == 1:
        return reshape(out, (out.shape[1],))
    if b.ndim == 1:
        return reshape(out, (out.shape[0],))
    return out


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
    """The einsum contractions a dense layer needs, on 1-D and 2-D DiskArrays: one or two
    operands, each index appearing at most twice, at most one contracted index between two
    operands (matrix products in any orientation, matrix-vector, outer and inner products), or
    transposes and sums of one operand. Products run as one out-of-core matmul with the
    transposes folded in; no operand is transposed on disk.

    >>> import numpy as np, jask
    >>> a = jask.DiskArray.from_numpy(np.ones((2, 3), np.float32))
    >>> jask.einsum("ij,kj->ik", a, a).shape
    (2, 2)
    """
    lhs, arrow, out = spec.replace(" ", "").partition("->")
    inputs = lhs.split(",")
    if not arrow or len(inputs) != len(operands) or len(inputs) not in (1, 2):
        raise NotImplementedError(f"jask.einsum supports 'in->out' with one or two operands, got {spec!r}")
    for x, idx in zip(operands, inputs):
        _check_disk("einsum", x)
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
    (ia, ib), shared = inputs, set(inputs[0]) & set(inputs[1])
    contracted = shared - set(out)
    if len(contracted) > 1 or shared - contracted or set(out) != (set(ia) | set(ib)) - contracted:
        raise NotImplementedError(f"jask.einsum does not support {spec!r}: it handles products with "
                                  f"at most one contracted index and no batch indices")
    if not contracted:  # outer product of two vectors
        if len(ia) != 1 or len(ib) != 1:
            raise NotImplementedError(f"jask.einsum does not support {spec!r}")
        return outer(a, b) if out == ia + ib else outer(b, a)
    (c,) = contracted
    if len(out) == 0:
        if len(ia) != 1:
            raise NotImplementedError(f"jask.einsum does not support {spec!r}")
        return vdot(a, b)
    # the operand holding the output's first index goes first
    first, second = ((a, ia), (b, ib)) if out[0] in ia else ((b, ib), (a, ia))
    (x, ix), (y, iy) = first, second
    x2 = x if x.ndim == 2 else reshape(x, (1, x.shape[0]))
    y2 = y if y.ndim == 2 else reshape(y, (y.shape[0], 1))
    trans_x = x.ndim == 2 and ix[0] == c  # stored (c, free): use its transpose
    trans_y = y.ndim == 2 and iy[1] == c  # stored (free, c)
    if len(out) == 1 and x.ndim == 1:  # vector on the left: out's index is in y
        x2, y2, trans_x, trans_y = reshape(x, (1, x.shape[0])), y, False, iy[1] == c
    product = apply(Matmul, x2, y2, trans_a=trans_x, trans_b=trans_y)
    return reshape(product, tuple(d for d in product.shape if len(out) == 2 or d != 1)) \
        if len(out) == 1 else product


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


def getitem(x, key):
    """x[key] for the keys Jask supports: an int or a slice (step 1) of the leading axis,
    optionally followed by full slices; the rows come back as a jax.Array."""
    key = key if isinstance(key, tuple) else (key,)
    head, rest = key[0], key[1:]
    if not all(isinstance(k, slice) and k == slice(None) for k in rest) or x.ndim == 0:
        raise NotImplementedError(f"DiskArray indexing supports x[i] and x[i:j] on the leading "
                                  f"axis; got the key {key!r} for a {describe(x)}")
    n = x.shape[0]
    if isinstance(head, (int, np.integer)):
        i = int(head) + n if head < 0 else int(head)
        if not 0 <= i < n:
            raise IndexError(f"index {int(head)} is out of bounds for axis 0 with size {n}")
        return rows(x, i, 1)[0]
    if isinstance(head, slice):
        if any(compat.is_tracer(v) for v in (head.start, head.stop, head.step)):
            raise TypeError("a slice with traced bounds has no static size; use "
                            "jask.rows(x, start, count) or jax.lax.dynamic_slice_in_dim(x, start, count)")
        start, stop, step = head.indices(n)
        if step != 1:
            raise NotImplementedError(f"DiskArray slices need step 1, got {step}")
        return rows(x, start, builtins.max(0, stop - start))
    if compat.is_tracer(head):
        return rows(x, head, 1)[0]
    raise NotImplementedError(f"DiskArray indexing with {type(head).__name__} keys is not supported yet")


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
        h = _engine.open_npy(path, writable)
    else:
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
        if offset < 0:
            raise ValueError(f"offset must be non-negative, got {offset}")
        h = _engine.open_raw(path, dtype_code(dtype), list(shape), int(offset), writable)
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
    update_=update_, astype=astype, getitem=getitem, less=less, less_equal=less_equal, greater=greater,
    greater_equal=greater_equal, equal=equal, not_equal=not_equal,
)
