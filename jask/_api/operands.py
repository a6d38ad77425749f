"""Checking and normalising the operands of the user-facing functions, and the size up to
which results come back in memory."""

from __future__ import annotations

import numbers

import jax
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray
from .._jax.op import describe
from ..ops._elementwise import scalar_like


def is_scalar(v) -> bool:
    if isinstance(v, DiskArray):
        return False
    if isinstance(v, (numbers.Number, np.generic)) and not isinstance(v, bool):
        return True
    return isinstance(v, (np.ndarray, jax.Array)) and np.ndim(v) == 0


def check_disk(fn: str, x) -> None:
    if not isinstance(x, DiskArray):
        raise TypeError(
            f"jask.{fn} expects a DiskArray, got {type(x).__name__}; wrap in-memory "
            f"data with jask.DiskArray.from_numpy"
        )


def unsupported_operands(fn: str, *values):
    def kind(v):
        if isinstance(v, DiskArray) or is_scalar(v) or hasattr(v, "shape"):
            try:
                return describe(v)
            except TypeError:
                pass
        return type(v).__name__

    raise TypeError(
        f"jask.{fn}: unsupported operands {' and '.join(kind(v) for v in values)}; "
        f"Jask supports DiskArrays, in-memory arrays and scalars that broadcast "
        f"together, with at least one DiskArray"
    )


def is_in_memory(v) -> bool:
    """An in-memory array (NumPy or JAX, traced or not) that is not a DiskArray."""
    return not isinstance(v, DiskArray) and (
        isinstance(v, (np.ndarray, jax.Array)) or compat.is_tracer(v)
    )


def elementwise_operands(fn: str, *values):
    """DiskArrays as they are; scalars and in-memory arrays as JAX arrays of the DiskArrays'
    dtype (they broadcast, NumPy-style)."""
    like = next((v for v in values if isinstance(v, DiskArray)), None)
    if like is None or not all(
        isinstance(v, DiskArray) or is_scalar(v) or is_in_memory(v) for v in values
    ):
        unsupported_operands(fn, *values)
    return [v if isinstance(v, DiskArray) else scalar_like(v, like) for v in values]


IN_MEMORY_LIMIT = 1 << 20
"""Results (of reductions over some axes, gathers, slices) with at most this many elements
are in-memory jax.Arrays; larger results stay on disk as DiskArrays."""


def in_memory_limit() -> int:
    """IN_MEMORY_LIMIT, read when a result is made (tests lower it)."""
    return IN_MEMORY_LIMIT


def small_result(shape, *operands) -> bool:
    """True when a product of `operands` with a result of `shape` is an in-memory jax.Array
    rather than a DiskArray: when a DiskArray operator is applied to an in-memory operand, i.e.
    the result has the shape of an in-memory operand and is no larger than the DiskArray one.
    A matrix-vector product `a @ v` (or `a @ B`, B in memory) then has the type of v, as
    custom_linear_solve, lineax and Krylov loops require of an operator; any other product of
    a DiskArray (a layer's activations, `x.T @ x`, an in-memory projection applied to a small
    DiskArray factor as optax's galore does) stays a DiskArray, so parameter-sized values built
    from DiskArrays stay on disk."""
    numel = int(np.prod(shape, dtype=np.int64))
    return any(
        not isinstance(v, DiskArray) and tuple(np.shape(v)) == tuple(shape) for v in operands
    ) and any(
        isinstance(v, DiskArray) and numel <= int(np.prod(v.shape, dtype=np.int64))
        for v in operands
    )
