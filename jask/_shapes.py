"""Shapes, sizes and offsets from users, checked before the engine sees them.

Rules as numpy.empty's: a dimension is an int (a Python int or a NumPy
integer, not a bool or a float: TypeError) and never negative (ValueError);
an array's bytes, with its file offset, must fit a file offset (int64).
"""

from __future__ import annotations

import math
import operator

import numpy as np

# Every file offset is an off_t, a signed 64-bit integer.
MAX_FILE_BYTES = 2**63 - 1


def as_int(value, what: str) -> int:
    """`value` as a Python int, if it is an integer (operator.index); TypeError naming it if not."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an int, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r} ({type(value).__name__})") from None


def as_shape(shape, what: str) -> tuple[int, ...]:
    """`shape` (an int or a sequence of ints) as a tuple of non-negative Python ints.

    Args:
      shape: an int, or a sequence of ints (NumPy integers count; bools and floats do not).
      what: the function or argument, for error messages.

    Returns:
      The shape as a tuple of ints.

    >>> as_shape(3, "jask.zeros"), as_shape([2, np.int64(3)], "jask.zeros")
    ((3,), (2, 3))
    """
    if isinstance(shape, (str, bytes)) or shape is None:
        raise TypeError(f"{what}: shape must be an int or a sequence of ints, got {shape!r}")
    try:
        dims = (as_int(shape, "a shape"),)
    except TypeError:
        try:
            items = tuple(shape)
        except TypeError:
            raise TypeError(
                f"{what}: shape must be an int or a sequence of ints, got {shape!r}"
            ) from None
        dims = tuple(as_int(d, f"{what}: every dimension of shape {shape!r}") for d in items)
    if any(d < 0 for d in dims):
        raise ValueError(f"{what}: negative dimension in shape {dims}")
    return dims


def check_nbytes(shape: tuple[int, ...], dtype: np.dtype, what: str, offset: int = 0) -> int:
    """The bytes of an array of `shape` and `dtype`; ValueError if, after `offset`, they do not
    fit a file offset. As in NumPy, zero dimensions count as one in that check.

    >>> check_nbytes((2, 3), np.dtype(np.float32), "jask.zeros")
    24
    """
    bound = math.prod(max(d, 1) for d in shape) * dtype.itemsize
    nbytes = 0 if 0 in shape else bound
    if bound > MAX_FILE_BYTES or offset + nbytes > MAX_FILE_BYTES:
        at = f" from offset {offset}" if offset else ""
        raise ValueError(
            f"{what}: shape {shape} of {dtype} is {bound} bytes{at}, more than the "
            f"{MAX_FILE_BYTES} (2**63 - 1) bytes a file offset can address"
        )
    return nbytes
