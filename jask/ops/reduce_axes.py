"""Sum, max or min over some axes of a DiskArray.

The result is a DiskArray (`ReduceAxes`) or an in-memory jax.Array
(`ReduceAxesDense`); jask.sum and friends pick by size (see jask._api).
"""
import jax
import jax.numpy as jnp

from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe
from ._elementwise import REDUCTIONS, BroadcastTo
from .reshape import Reshape


def reduced_shape(x, axes) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def kept_shape(x, axes) -> tuple[int, ...]:
    """The result's shape with the reduced axes kept as 1 (it broadcasts against x)."""
    return tuple(1 if i in axes else d for i, d in enumerate(x.shape))


class ReduceAxes(Op):
    name = "reduce_axes"
    kernel = "reduce_axes"

    def out_type(self, x, *, axes, reduction):
        if not isinstance(x, DiskArrayTy) or len(set(axes)) != len(axes) or any(
                not 0 <= a < x.ndim for a in axes):
            raise ValueError(f"jask.{reduction}: invalid axes {axes} for {describe(x)}")
        return self.result_type(reduced_shape(x, axes), x.dtype)

    def result_type(self, shape, dtype):
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {"reduction": REDUCTIONS[self.reduction], "axes": self.axes}

    def vjp(self, ct, x, *, out, needs):
        return (spread(ct, x, out, self.axes, self.reduction),)

    def tangent(self, out, operands, tangents):
        (x,), (tx,) = operands, tangents
        if self.reduction == "sum":
            return apply(type(self), tx, axes=self.axes, reduction="sum")
        weights = chosen(x, out, self.axes)
        return apply(type(self), tx * weights, axes=self.axes, reduction="sum")


class ReduceAxesDense(ReduceAxes):
    result = "in_memory"

    def result_type(self, shape, dtype):
        return compat.ShapedArray(shape, jax.dtypes.canonicalize_dtype(dtype))


def chosen(x, out, axes):
    """Where x equals its max (or min) along `axes`, as weights that split ties evenly."""
    hits = (x == _broadcast(out, axes, x)).astype(x.dtype)
    counts = apply(ReduceAxes, hits, axes=axes, reduction="sum")
    return hits / _broadcast(counts, axes, x)


def _broadcast(value, axes, x):
    """A reduced value (or cotangent) spread back over the reduced axes of x."""
    kept = kept_shape(x, axes)
    value = apply(Reshape, value, shape=kept) if isinstance(value, DiskArray) else jnp.reshape(value, kept)
    return apply(BroadcastTo, value, shape=x.shape)


def spread(ct, x, out, axes, reduction):
    """The cotangent of x for a reduction over `axes` with output cotangent ct."""
    g = _broadcast(ct, axes, x)
    return g if reduction == "sum" else g * chosen(x, out, axes)
