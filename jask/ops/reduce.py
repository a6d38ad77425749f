"""Reductions and broadcasts, each the other's backward rule.

`Reduce` is the sum, max, min or product of one elementwise instruction over all elements
(sum(x), sum(x * y)); `ReduceAxes` reduces some axes, to a DiskArray or (`ReduceAxesInMemory`) an
in-memory jax.Array (jask.sum and friends pick by size). `BroadcastTo` and `Fill` spread
values back out; `reduce_to` sums a broadcast operand's cotangent back to its shape
(autograd's `unbroadcast`), written once for every elementwise op.
"""

import jax
import jax.numpy as jnp

from .._dtypes import dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, Role, apply, describe, double_scalar, scalar_type
from ._elementwise import (
    REDUCTIONS,
    Elementwise,
    Expression,
    broadcast_shape,
    common_dtype,
    encode,
    operand_shape,
    scalar_like,
    single_instruction,
)
from .in_memory import ToInMemory
from .reshape import Reshape


def reduce_to(g, operand):
    """`g` (of the broadcast output's shape) as the cotangent of `operand`, a value or its
    type: summed over the axes along which the operand was broadcast."""
    on_disk = isinstance(operand, (DiskArray, DiskArrayTy))
    if g is None or (on_disk and tuple(operand.shape) == tuple(g.shape)):
        return g
    if tuple(operand.shape) == tuple(g.shape):  # an in-memory operand of the full shape
        return apply(ToInMemory, g).astype(jax.dtypes.canonicalize_dtype(operand.dtype))
    if not operand.shape and not on_disk:
        dtype = jax.dtypes.canonicalize_dtype(operand.dtype)
        return apply(Reduce, g, instr="copy", reduction="sum").astype(dtype)
    lead = len(g.shape) - len(operand.shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(operand.shape) if d == 1 and g.shape[lead + i] != 1
    )
    summed = apply(ReduceAxes if on_disk else ReduceAxesInMemory, g, axes=axes, reduction="sum")
    if on_disk:
        return apply(Reshape, summed, shape=tuple(operand.shape))
    return summed.reshape(operand.shape).astype(jax.dtypes.canonicalize_dtype(operand.dtype))


class BroadcastTo(Elementwise):
    """An array, in memory or on disk (or a scalar), broadcast to a larger shape as a new
    DiskArray."""

    name = "broadcast_to"
    instr = "copy"
    linear = True

    def out_type(self, x, *, shape):
        if broadcast_shape(self.name, [x, tuple(shape)]) != tuple(shape):
            raise ValueError(f"jask.broadcast_to: cannot broadcast {describe(x)} to {shape}")
        return DiskArrayTy(tuple(shape), x.dtype)

    def transpose_rule(self, ct, x):
        return reduce_to(ct, x)


class Fill(Op):
    """A new DiskArray of a given shape with every element equal to a scalar."""

    name = "full"
    kernel = "fill"
    role = Role.BROADCAST
    linear = True

    def out_type(self, value, *, shape, dtype):
        scalar_type(self.name, value)
        return DiskArrayTy(shape, dtype)

    def expression(self) -> Expression:
        out = self.out_aval
        return Expression(single_instruction("copy", 1), "none", out.dtype, "fill", out.shape)

    def kernel_params(self):
        return {"dtype": dtype_code(self.out_aval.dtype), "shape": self.shape}

    def transpose_rule(self, ct, value):
        return reduce_to(ct, value)


def filled(value, shape, dtype):
    """A new DiskArray of `shape` and `dtype` with every element `value` (0-d, of `dtype` as JAX
    holds it): the engine's fill where its double scalar stands for the value (zeros are a new
    file, nothing written), else the value's bytes copied to every element (an int64 past
    2**53, a complex number)."""
    scalar = double_scalar(value)
    if scalar is None:
        return apply(BroadcastTo, value, shape=tuple(shape))
    return apply(Fill, scalar, shape=tuple(shape), dtype=dtype)


class Reduce(Op):
    """The sum, max, min or product over all elements of one elementwise instruction's result."""

    name = "reduce"
    kernel = "map_reduce"
    result = "scalar"
    role = Role.REDUCTION
    scalars = "exact"

    def out_type(self, *operands, instr, reduction):
        _, arrays = operand_shape(self.name, operands)
        dtype = common_dtype(self.name, arrays)
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(dtype))

    def expr(self) -> tuple:
        return single_instruction(self.instr, len(self.in_avals))

    def expression(self) -> Expression:
        label = self.reduction if self.instr == "copy" else f"{self.instr}+{self.reduction}"
        shape, arrays = operand_shape(self.name, self.in_avals)
        return Expression(
            self.expr(), self.reduction, common_dtype(self.name, arrays), label, shape
        )

    def kernel_params(self):
        shape, arrays = operand_shape(self.name, self.in_avals)
        return {
            "label": self.reduction,
            **encode(
                self.expr(), self.in_avals, shape, common_dtype(self.name, arrays), self.reduction
            ),
        }

    @property
    def linear(self):  # sum(x)
        return self.reduction == "sum" and self.instr == "copy"

    @property
    def bilinear(self):  # sum(x * y)
        return self.reduction == "sum" and self.instr == "mul"

    def transpose_rule(self, ct, *operands, needs=None):
        if self.linear:
            (x,) = operands
            return filled(ct, x.shape, x.dtype)
        a, b = operands
        # DiskArray operators: Mul's module needs this one
        return (
            b * scalar_like(ct, b) if needs[0] else None,
            a * scalar_like(ct, a) if needs[1] else None,
        )

    def slope(self, x, out):  # max, min, prod
        if self.instr != "copy":
            raise NotImplementedError(
                f"jax.grad of jask.{self.reduction} of {self.instr} needs a derivative rule"
            )
        return SLOPES[self.reduction](x, out, None)

    def tangent_term(self, t, slope):
        return apply(Reduce, t, slope, instr="mul", reduction="sum")

    def cotangent_term(self, ct, slope, x):
        return slope * scalar_like(ct, x)


def reduced_shape(x, axes) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def kept_shape(x, axes) -> tuple[int, ...]:
    """The result's shape with the reduced axes kept as 1 (it broadcasts against x)."""
    return tuple(1 if i in axes else d for i, d in enumerate(x.shape))


class ReduceAxes(Op):
    name = "reduce_axes"
    kernel = "reduce_axes"

    def out_type(self, x, *, axes, reduction):
        if (
            not isinstance(x, DiskArrayTy)
            or len(set(axes)) != len(axes)
            or any(not 0 <= a < x.ndim for a in axes)
        ):
            raise ValueError(f"jask.{reduction}: invalid axes {axes} for {describe(x)}")
        return self.result_type(reduced_shape(x, axes), x.dtype)

    def result_type(self, shape, dtype):
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {"reduction": REDUCTIONS[self.reduction], "axes": self.axes}

    @property
    def linear(self):
        return self.reduction == "sum"

    def transpose_rule(self, ct, x):
        return _broadcast(ct, self.axes, x)

    def slope(self, x, out):  # max, min, prod
        return SLOPES[self.reduction](x, out, self.axes)

    def tangent_term(self, t, slope):
        return apply(type(self), t * slope, axes=self.axes, reduction="sum")

    def cotangent_term(self, ct, slope, x):
        return _broadcast(ct, self.axes, x) * slope


class ReduceAxesInMemory(ReduceAxes):
    result = "in_memory"

    def result_type(self, shape, dtype):
        return compat.ShapedArray(shape, jax.dtypes.canonicalize_dtype(dtype))

    def kernel_params(self):
        return {**super().kernel_params(), "dtype": dtype_code(self.out_aval.dtype)}


# -- d out / d x of the reductions that are not linear, over `axes` (None: every axis); written
# with DiskArray operators, as `where` and the arithmetic ops are built on this module --------


def chosen(x, out, axes):
    """max and min: 1/k on the k elements of x that attain `out`, 0 elsewhere (ties split
    evenly, as in JAX)."""
    hits = (x == _spread(out, axes, x)).astype(x.dtype)
    return hits / _spread(_reduced(hits, axes, "sum"), axes, x)


def others(x, out, axes):
    """prod: the product of the other elements, without dividing by zero: out / x where x is
    not 0; where x is 0, the product of the nonzero elements if x is the only zero, else 0.
    Second derivatives are exact except where two or more elements are zero."""
    zero = (x == 0.0).astype(x.dtype)
    # x with 1 in place of each 0, written so that a 0's own value does not enter it (a lone
    # zero's slope, the product of the others, must not vary with that zero)
    safe = x * (1.0 - zero) + zero
    lone = (_reduced(zero, axes, "sum") == 1.0).astype(x.dtype)
    at_zero = _spread(_reduced(safe, axes, "prod") * lone, axes, x)
    return zero * at_zero + ((1.0 - zero) * _spread(out, axes, x)) / safe


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
    if isinstance(value, DiskArray):
        value = apply(Reshape, value, shape=kept)
    else:
        value = jnp.reshape(value, kept)
    return apply(BroadcastTo, value, shape=x.shape)
