"""Elementwise functions: arithmetic, comparisons, unary math and activations, where, astype."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from .._dtypes import storage_dtype
from .._jax.diskarray import DiskArray
from .._jax.op import apply
from ..ops import (
    OPS,
    Add,
    Astype,
    Div,
    Equal,
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
    Maximum,
    Minimum,
    Mul,
    NotEqual,
    Pow,
    Sub,
    Where,
)
from ..ops._elementwise import scalar_like
from ..ops._pointwise import Unary
from .operands import (
    check_disk,
    elementwise_operands,
    is_in_memory,
    is_scalar,
    unsupported_operands,
)


def _elementwise(op, fn: str):
    def apply_op(*values):
        return apply(op, *elementwise_operands(fn, *values))

    return apply_op


_add, _sub, _mul, _div = (
    _elementwise(op, fn) for op, fn in ((Add, "add"), (Sub, "sub"), (Mul, "mul"), (Div, "divide"))
)


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
    return apply(Pow, *elementwise_operands("power", x, y))


def maximum(x, y):
    """The larger of x and y, elementwise (NaN wins, as in jnp.maximum).

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.array([-1., 2.], np.float32))
    >>> np.asarray(jask.maximum(x, 0.0)).tolist()
    [0.0, 2.0]
    """
    return apply(Maximum, *elementwise_operands("maximum", x, y))


def minimum(x, y):
    """The smaller of x and y, elementwise (NaN wins, as in jnp.minimum).

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.array([-1., 2.], np.float32))
    >>> np.asarray(jask.minimum(x, 0.0)).tolist()
    [-1.0, 0.0]
    """
    return apply(Minimum, *elementwise_operands("minimum", x, y))


def clip(x, min=None, max=None):  # noqa: A002 - mirrors jnp.clip
    """x limited to [min, max], elementwise (either bound may be None).

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.array([-2., 0.5, 3.], np.float32))
    >>> np.asarray(jask.clip(x, -1, 1)).tolist()
    [-1.0, 0.5, 1.0]
    """
    check_disk("clip", x)
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
        return unsupported_operands("where", x, y)
    like = next((v for v in (x, y) if isinstance(v, DiskArray)), None)
    branches = [
        v if isinstance(v, DiskArray) or like is None else scalar_like(v, like) for v in (x, y)
    ]
    branches = [jnp.asarray(v) if not isinstance(v, DiskArray) else v for v in branches]
    if not all(
        isinstance(v, DiskArray) or is_scalar(v) or is_in_memory(v) for v in (condition, *branches)
    ):
        return unsupported_operands("where", x, y)
    if not isinstance(condition, DiskArray):
        condition = jnp.asarray(condition, jnp.bool_)
    return apply(Where, condition, *branches)


def _unary_function(op):
    """jask.<name>(x) for a `Unary` op, with a docstring and a `>>>` example from its declaration."""

    def function(x):
        check_disk(op.name, x)
        return apply(op, x)

    function.__name__ = function.__qualname__ = op.name
    function.__module__ = __name__
    described = vars(op).get("__doc__") or sys.modules[op.__module__].__doc__ or op.name
    summary = described.strip().splitlines()[0]
    function.__doc__ = (
        f"{summary}\n\n    Derived from the declaration of `jask.ops.{op.__name__}` (the jax.lax "
        f"primitive {', '.join(op.primitives) or op.name} on a DiskArray).\n"
    )
    return function


# One function per Unary op, derived from its declaration: the ops' own functions, which other
# Jask functions call (users call jnp's, which reach the same ops through the primitives).
UNARY_FUNCTIONS = {op.name: _unary_function(op) for op in OPS if issubclass(op, Unary)}
globals().update(UNARY_FUNCTIONS)


def _comparison(op, fn):
    def compare(x, y):
        return apply(op, *elementwise_operands(fn, x, y))

    compare.__name__ = fn
    return compare


less, less_equal, greater, greater_equal, equal, not_equal = (
    _comparison(op, fn)
    for op, fn in (
        (Less, "less"),
        (LessEqual, "less_equal"),
        (Greater, "greater"),
        (GreaterEqual, "greater_equal"),
        (Equal, "equal"),
        (NotEqual, "not_equal"),
    )
)


def astype(x, dtype):
    """x converted to `dtype` (one of Jask's storage dtypes); x itself when it already has it.

    >>> import numpy as np, jask
    >>> jask.astype(jask.DiskArray.from_numpy(np.ones(2, np.float32)), "float16").dtype
    dtype('float16')
    """
    check_disk("astype", x)
    dt = storage_dtype(dtype)
    return x if dt == x.dtype else apply(Astype, x, dtype=dt)
