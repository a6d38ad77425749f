"""New arrays: full, zeros and the *_like functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._dtypes import jax_dtype, storage_dtype
from .._jax.diskarray import DiskArray, with_weak_type
from .._shapes import as_shape, check_nbytes
from ..ops.reduce import filled


def full(shape, fill_value, dtype="float32") -> DiskArray:
    """A new DiskArray of `shape` filled with `fill_value`.

    >>> import jask
    >>> float(jask.sum(jask.full((2, 2), 3.0)))
    12.0
    """
    dt = storage_dtype(jax_dtype(dtype))  # float64 is float32 without x64, as in jnp.full
    shape = as_shape(shape, "jask.full")
    check_nbytes(shape, dt, "jask.full")
    value = jnp.asarray(fill_value, dtype=jax.dtypes.canonicalize_dtype(dt))
    return filled(value, shape, dt)


def zeros(shape, dtype="float32") -> DiskArray:
    """A new DiskArray of zeros (a sparse file: nothing is written).

    >>> import jask
    >>> jask.zeros((3, 2)).shape
    (3, 2)
    """
    return full(shape, 0, dtype)


def zeros_like(x, dtype=None) -> DiskArray:
    """A new DiskArray of zeros with x's shape (and dtype, unless given)."""
    return full_like(x, 0, dtype)


def full_like(x, fill_value, dtype=None) -> DiskArray:
    """A new DiskArray of x's shape (and dtype, unless given) filled with `fill_value`; weakly
    typed where x is and no dtype is given, as jax.lax.full_like."""
    if dtype is not None:
        return full(x.shape, fill_value, dtype)
    return with_weak_type(full(x.shape, fill_value, x.dtype), getattr(x, "weak_type", False))


def ones_like(x, dtype=None) -> DiskArray:
    """A new DiskArray of ones with x's shape (and dtype, unless given)."""
    return full_like(x, 1, dtype)
