"""Sum, max, min or product over some axes of a DiskArray.

The result is a DiskArray (`ReduceAxes`) or an in-memory jax.Array
(`ReduceAxesDense`); jask.sum and friends pick by size (see jask._api).
"""
import jax
import jax.numpy as jnp

from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe
from ._elementwise import REDUCTIONS, BroadcastTo, Reduce, scalar_like
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
        return (REDUCTIONS[self.reduction], *self.axes)

    @property
    def linear(self):
        return self.reduction == "sum"

    def transpose_rule(self, ct, x):
        return _broadcast(ct, self.axes, x)

    def slope(self, x, out):
        return SLOPES[self.reduction](x, out, self.axes)

    def tangent_term(self, t, slope):
        return apply(type(self), t * slope, axes=self.axes, reduction="sum")

    def cotangent_term(self, ct, slope, x):
        return _broadcast(ct, self.axes, x) * slope


class ReduceAxesDense(ReduceAxes):
    result = "dense"

    def result_type(self, shape, dtype):
        return compat.ShapedArray(shape, jax.dtypes.canonicalize_dtype(dtype))


# -- d out / d x of the reductions that are not linear: over `axes`, or every axis if None ----

def chosen(x, out, axes):
    """max and min: 1/k on the k elements of x that attain `out`, 0 elsewhere (ties split
    evenly, as in JAX)."""
    hits = (x == _spread(out, axes, x)).astype(x.dtype)
    return hits / _spread(_reduced(hits, axes, "sum"), axes, x)


def others(x, out, axes):
    """prod: the product of the other elements, without dividing by zero: out / x where x is
    not 0; where x is 0, the product of the nonzero elements if x is the only zero, else 0.
    (Second derivatives are exact except where two or more elements are zero.)"""
    from .div import Div
    from .where import Where
    is_zero = x == 0.0
    safe = apply(Where, is_zero, scalar_like(1, x), x)
    lone = (_reduced(is_zero.astype(x.dtype), axes, "sum") == 1.0).astype(x.dtype)
    at_zero = _spread(_reduced(safe, axes, "prod") * lone, axes, x)
    return apply(Where, is_zero, at_zero, apply(Div, _spread(out, axes, x), safe))


SLOPES = {"max": chosen, "min": chosen, "prod": others}


def _reduced(x, axes, reduction):
    if axes is None:
        return apply(Reduce, x, instr="copy", reduction=reduction)
    return apply(ReduceAxes, x, axes=axes, reduction=reduction)


def _spread(value, axes, x):
    """A reduced value back over x's shape (a full reduction's 0-d value broadcasts as it is)."""
    return scalar_like(value, x) if axes is None else _broadcast(value, axes, x)


def _broadcast(value, axes, x):
    """A reduced value (or cotangent) spread back over the reduced axes of x."""
    kept = kept_shape(x, axes)
    value = apply(Reshape, value, shape=kept) if isinstance(value, DiskArray) else jnp.reshape(value, kept)
    return apply(BroadcastTo, value, shape=x.shape)
