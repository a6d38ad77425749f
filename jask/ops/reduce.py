"""Reductions and broadcasts, each the other's backward rule.

`Reduce` is the sum, max or min of one elementwise instruction over all elements (sum(x),
sum(x * y)); `ReduceAxes` reduces some axes, to a DiskArray or (`ReduceAxesInMemory`) an
in-memory jax.Array (jask.sum and friends pick by size). `BroadcastTo` and `Fill` spread
values back out; `reduce_to` sums a broadcast operand's cotangent back to its shape
(autograd's `unbroadcast`), written once for every elementwise op.
"""
import jax
import jax.numpy as jnp

from .._dtypes import dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, Role, add_terms, apply, describe, scalar_type
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
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(operand.shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    summed = apply(ReduceAxes if on_disk else ReduceAxesInMemory, g, axes=axes, reduction="sum")
    if on_disk:
        return apply(Reshape, summed, shape=tuple(operand.shape))
    return summed.reshape(operand.shape).astype(jax.dtypes.canonicalize_dtype(operand.dtype))


class BroadcastTo(Elementwise):
    """An array, in memory or on disk (or a scalar), broadcast to a larger shape as a new
    DiskArray."""

    name = "broadcast_to"
    instr = "copy"

    def out_type(self, x, *, shape):
        if broadcast_shape(self.name, [x, tuple(shape)]) != tuple(shape):
            raise ValueError(f"jask.broadcast_to: cannot broadcast {describe(x)} to {shape}")
        return DiskArrayTy(tuple(shape), x.dtype)

    def vjp(self, ct, x, *, out, needs):
        return (reduce_to(ct, x),)

    def tangent(self, out, operands, tangents):
        return apply(BroadcastTo, tangents[0], shape=self.shape)


class Fill(Op):
    """A new DiskArray of a given shape with every element equal to a scalar."""

    name = "full"
    kernel = "fill"
    role = Role.BROADCAST

    def out_type(self, value, *, shape, dtype):
        scalar_type(self.name, value)
        return DiskArrayTy(shape, dtype)

    def expression(self) -> Expression:
        out = self.out_aval
        return Expression(single_instruction("copy", 1), "none", out.dtype, "fill", out.shape)

    def kernel_params(self):
        return {"dtype": dtype_code(self.out_aval.dtype), "shape": self.shape}

    def vjp(self, ct, value, *, out, needs):
        return (reduce_to(ct, value),)

    def tangent(self, out, operands, tangents):
        return apply(Fill, tangents[0], shape=self.shape, dtype=self.dtype)


class Reduce(Op):
    """The sum, max or min over all elements of one elementwise instruction's result."""

    name = "reduce"
    kernel = "map_reduce"
    result = "scalar"
    role = Role.REDUCTION

    def out_type(self, *operands, instr, reduction):
        _, arrays = operand_shape(self.name, operands)
        dtype = common_dtype(self.name, arrays)
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(dtype))

    def expr(self) -> tuple:
        return single_instruction(self.instr, len(self.in_avals))

    def expression(self) -> Expression:
        label = self.reduction if self.instr == "copy" else f"{self.instr}+{self.reduction}"
        shape, arrays = operand_shape(self.name, self.in_avals)
        return Expression(self.expr(), self.reduction, common_dtype(self.name, arrays), label,
                          shape)

    def kernel_params(self):
        shape, arrays = operand_shape(self.name, self.in_avals)
        return {"label": self.reduction,
                **encode(self.expr(), self.in_avals, shape, arrays[0].dtype, self.reduction)}

    def vjp(self, ct, *operands, out, needs):
        if self.reduction == "sum" and self.instr == "copy":
            (x,) = operands
            return (apply(Fill, ct, shape=x.shape, dtype=x.dtype),)
        if self.reduction == "sum" and self.instr == "mul":
            a, b = operands
            # DiskArray operators: Mul's own backward rule needs this module
            return (b * scalar_like(ct, b) if needs[0] else None,
                    a * scalar_like(ct, a) if needs[1] else None)
        if self.instr == "copy":  # max or min: ct split evenly among the elements that attain it
            (x,) = operands
            return (_chosen_element(x, out) * scalar_like(ct, x),)
        raise NotImplementedError(
            f"jax.grad of jask.{self.reduction} of {self.instr} needs a backward rule")

    def tangent(self, out, operands, tangents):
        if self.reduction == "sum" and self.instr == "copy":
            return apply(Reduce, tangents[0], instr="copy", reduction="sum")
        if self.reduction == "sum" and self.instr == "mul":
            (a, b), (ta, tb) = operands, tangents
            vdot = lambda u, v: apply(Reduce, u, v, instr="mul", reduction="sum")  # noqa: E731
            terms = [None if ta is None else vdot(ta, b), None if tb is None else vdot(a, tb)]
            return add_terms(*terms)
        if self.instr == "copy":  # max or min
            x, tx = operands[0], tangents[0]
            return apply(Reduce, tx * _chosen_element(x, out), instr="copy", reduction="sum")
        raise NotImplementedError(
            f"jax.jvp of jask.{self.reduction} of {self.instr} needs a forward rule")


def _chosen_element(x, out):
    """Weights 1/k on the k elements of x equal to its max (or min) `out`, 0 elsewhere."""
    hits = (x == scalar_like(out, x)).astype(x.dtype)
    return hits / apply(Reduce, hits, instr="copy", reduction="sum").astype(hits.dtype)


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


class ReduceAxesInMemory(ReduceAxes):
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
    if isinstance(value, DiskArray):
        value = apply(Reshape, value, shape=kept)
    else:
        value = jnp.reshape(value, kept)
    return apply(BroadcastTo, value, shape=x.shape)


def spread(ct, x, out, axes, reduction):
    """The cotangent of x for a reduction over `axes` with output cotangent ct."""
    g = _broadcast(ct, axes, x)
    return g if reduction == "sum" else g * chosen(x, out, axes)
