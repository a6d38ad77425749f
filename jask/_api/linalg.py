"""Products: jax.lax.dot_general on DiskArrays (which every jax.numpy product binds: matmul,
einsum, tensordot, inner, outer, ...), and the matmul, dot and vdot it is built on."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray
from .._jax.op import apply, describe
from ..ops import FromInMemory, Matmul, Reduce
from ..ops.matmul import matmul_type
from . import elementwise, reductions
from .operands import check_disk, is_in_memory, unsupported_operands
from .shape import reshape, transpose


def vdot(x, y):
    """sum(x * y) over two DiskArrays of one shape, as a 0-d jax.Array.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.arange(3, dtype=np.float32))
    >>> float(jask.vdot(x, x))
    5.0
    """
    check_disk("vdot", x)
    check_disk("vdot", y)
    if jnp.issubdtype(x.dtype, jnp.integer):
        # The engine's 0-d results cross as doubles; its axis reducer keeps integers exact.
        return reductions.sum(elementwise.mul(x, y))
    return apply(Reduce, x, y, instr="mul", reduction="sum")


def _matmul_operands(fn: str, a, b):
    """The two operands of a matrix product as DiskArrays. An in-memory array (a weight
    held by JAX) is written to disk with FromInMemory, whose backward rule brings its gradient
    back as a jax.Array; it must have the DiskArray's dtype."""
    disk = next((v for v in (a, b) if isinstance(v, DiskArray)), None)
    if disk is None or not all(isinstance(v, DiskArray) or is_in_memory(v) for v in (a, b)):
        unsupported_operands(fn, a, b)
    values = [v if isinstance(v, DiskArray) else jnp.asarray(v) for v in (a, b)]
    for v in values:
        if not isinstance(v, DiskArray) and np.dtype(v.dtype) != np.dtype(disk.dtype):
            raise TypeError(
                f"jask.{fn}: dtypes differ: {describe(values[0])} and "
                f"{describe(values[1])}; "
                f"convert one of them with .astype first"
            )
    return [v if isinstance(v, DiskArray) else apply(FromInMemory, v) for v in values]


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
        raise ValueError(
            f"jask.{fn}: operands need at least one axis, got {describe(a)} and {describe(b)}"
        )
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise ValueError(f"jask.{fn}: vector lengths differ: {describe(a)} and {describe(b)}")
        return vdot(a, b)
    k_a, k_b = a.shape[-1], b.shape[-2 if b.ndim > 1 else 0]
    if 1 in (a.ndim, b.ndim) and k_a != k_b:  # named here: promoted vectors would show as matrices
        raise ValueError(
            f"jask.{fn}: contracted dimensions differ ({k_a} vs {k_b}) for "
            f"{describe(a)} @ {describe(b)}"
        )
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
        isinstance(v, DiskArray) or is_in_memory(v) for v in (a, b)
    ):
        return unsupported_operands("dot", a, b)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError(
            f"jask.dot supports 1-D and 2-D operands, got {describe(a)} and "
            f"{describe(b)}; "
            f"jask.matmul multiplies batches of matrices"
        )
    return _matmul("dot", a, b)


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    """jax.lax.dot_general with a DiskArray on either side or both (the other in memory).

    Args:
      lhs, rhs: the operands; at least one a DiskArray.
      dimension_numbers: ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as
        jax.lax.dot_general takes them.
      preferred_element_type: the result's dtype (default: the operands' common dtype); the
        product is computed in it.

    Returns:
      The product, with the batch axes first, then lhs's free axes, then rhs's (lax's
      order): a DiskArray, or a 0-d jax.Array when every axis is contracted.

    >>> import numpy as np, jax, jask
    >>> x = jask.DiskArray.from_numpy(np.ones((4, 3), np.float32))
    >>> jax.lax.dot_general(x, x, (((1,), (1,)), ((), ()))).shape
    (4, 4)
    """
    (lc, rc), (lb, rb) = (
        tuple(tuple(int(d) for d in t) for t in pair) for pair in dimension_numbers
    )
    lhs, rhs = (v if isinstance(v, DiskArray) else jnp.asarray(v) for v in (lhs, rhs))
    _check_dimension_numbers(lhs, rhs, lc, rc, lb, rb)
    dtype = np.dtype(compat.dot_general_dtype(lhs.dtype, rhs.dtype, preferred_element_type))
    if dtype == np.bool_:  # any(lhs & rhs) over the contracted axes: a count of both-True pairs
        counts = dot_general(
            *(_as_dtype(v, np.dtype(np.int32)) for v in (lhs, rhs)), dimension_numbers
        )
        return counts != 0
    lhs, rhs = (_as_dtype(v, dtype) for v in (lhs, rhs))
    lf = tuple(d for d in range(lhs.ndim) if d not in lc and d not in lb)
    rf = tuple(d for d in range(rhs.ndim) if d not in rc and d not in rb)
    batch = tuple(lhs.shape[d] for d in lb)
    out_shape = batch + tuple(lhs.shape[d] for d in lf) + tuple(rhs.shape[d] for d in rf)
    if not lf and not rf:  # nothing free: a product summed over the contracted axes
        a = _permuted(lhs, lb + lc)
        b = _permuted(rhs, rb + rc)
        if not batch:
            return vdot(*_matmul_operands("dot_general", a, b)) if a.ndim else a * b
        product = elementwise.mul(a, b)
        return reductions.sum(product, axis=tuple(range(len(batch), a.ndim))) if lc else product
    a, trans_a = _matrix_stack(lhs, lb, lf, lc)
    b, trans_b = _matrix_stack(rhs, rb, rc, rf)
    a, b = _matmul_operands("dot_general", a, b)
    return _reshaped(_product("dot_general", a, b, trans_a, trans_b), out_shape)


def _check_dimension_numbers(lhs, rhs, lc, rc, lb, rb):
    pair = f"{describe(lhs)} and {describe(rhs)}"
    for axes, x in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(axes)) != len(axes) or any(not 0 <= d < x.ndim for d in axes):
            raise ValueError(
                f"jask.dot_general: axes {axes} are not distinct axes of {describe(x)} ({pair})"
            )
    for kind, a_axes, b_axes in (("contracting", lc, rc), ("batch", lb, rb)):
        a_sizes = tuple(lhs.shape[d] for d in a_axes)
        b_sizes = tuple(rhs.shape[d] for d in b_axes)
        if a_sizes != b_sizes:  # worded as jax.lax.dot_general's own error
            raise TypeError(
                f"dot_general requires {kind} dimensions to have the same shape, got {a_sizes} "
                f"and {b_sizes} (axes {a_axes} and {b_axes} of {pair})"
            )


def _as_dtype(x, dtype):
    if np.dtype(x.dtype) == dtype:
        return x
    return elementwise.astype(x, dtype) if isinstance(x, DiskArray) else x.astype(dtype)


def _permuted(x, perm):
    if perm == tuple(range(x.ndim)):
        return x
    return transpose(x, perm) if isinstance(x, DiskArray) else jnp.transpose(x, perm)


def _reshaped(x, shape):
    if tuple(x.shape) == tuple(shape):
        return x
    return reshape(x, shape) if isinstance(x, DiskArray) else jnp.reshape(x, shape)


def _matrix_stack(x, batch, rows, cols):
    """x as a stack of (rows, cols) matrices (the row axes, then the column axes, merged), its
    batch axes first; and whether it is stored transposed, (cols, rows), which a product reads
    without writing the transpose (chosen when that order needs no permutation on disk)."""
    stored = tuple(range(x.ndim))
    trans = batch + rows + cols != stored and batch + cols + rows == stored
    sizes = [int(np.prod([x.shape[d] for d in axes], dtype=np.int64)) for axes in (rows, cols)]
    stack = tuple(x.shape[d] for d in batch)
    x = _permuted(x, batch + cols + rows if trans else batch + rows + cols)
    return _reshaped(x, stack + tuple(sizes[::-1] if trans else sizes)), trans
