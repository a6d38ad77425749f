"""Elementwise ops declared by their slopes: d out / d operand, written with Jask ops.

A tangent is scaled by its operand's slope; so is a cotangent, which `reduce_to` then sums back
over the axes its operand was broadcast along (broadcasting is undone once, here). This family
sits above ops/reduce.py, whose reductions it needs; `Elementwise` itself sits below them.
"""

from .._jax.diskarray import DiskArray
from .._jax.op import apply, scaled
from ._elementwise import Elementwise
from .reduce import BroadcastTo, reduce_to


class Pointwise(Elementwise):
    """An elementwise op whose derivative is `slope` (one operand) or `slopes` (several)."""

    def tangent_term(self, t, slope):
        return scaled(t, slope)

    def cotangent_term(self, ct, slope, operand):
        return reduce_to(scaled(ct, slope), operand)

    def tangent_like(self, t, out):
        """A tangent of a broadcast operand (or an in-memory one) spread to the output."""
        if isinstance(t, DiskArray) and tuple(t.shape) == tuple(out.shape):
            return t
        return apply(BroadcastTo, t, shape=tuple(out.shape))


class Unary(Pointwise):
    """An elementwise op of one DiskArray, declared by `slope(x, out)`. Its function
    the jax.lax primitives it implements are named in `primitives`."""


class Binary(Pointwise):
    """An elementwise op of two operands (DiskArrays, in-memory arrays and scalars that
    broadcast), declared by `slopes(x, y, out)`; the jax.lax primitives it implements are
    named in `primitives`."""
