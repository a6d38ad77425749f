"""Rounding to integral values and finiteness, elementwise: floor, ceil, round, is_finite.
Their derivatives are zero (they are piecewise constant)."""

from .._jax.op import apply
from ._pointwise import Pointwise, Unary


class Floor(Unary):
    """The largest integral value not above x, elementwise."""

    name = instr = "floor"
    accepts = "float"
    primitives = ("floor",)
    zero_derivative = True


class Ceil(Unary):
    """The smallest integral value not below x, elementwise."""

    name = instr = "ceil"
    accepts = "float"
    primitives = ("ceil",)
    zero_derivative = True


class Round(Pointwise):
    """x rounded to an integral value: halves away from zero (jax.lax.round's rounding_method
    0) or to even (1, jnp.round's)."""

    name = "round"
    accepts = "float"
    primitives = ("round",)
    zero_derivative = True

    def out_type(self, x, *, rounding_method):
        if int(rounding_method) not in (0, 1):
            raise ValueError(f"jask.round: unknown rounding_method {rounding_method!r}")
        return super().out_type(x)

    @classmethod
    def from_primitive(cls, x, *, rounding_method):
        return apply(cls, x, rounding_method=int(rounding_method))

    @property
    def instr(self):
        return "round_even" if int(self.params["rounding_method"]) else "round"


class IsFinite(Unary):
    """Whether x is neither infinite nor NaN, elementwise (a bool DiskArray)."""

    name = instr = "is_finite"
    accepts = "float"
    bool_result = True
    primitives = ("is_finite",)
    zero_derivative = True
