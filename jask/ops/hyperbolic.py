"""Hyperbolic functions and their inverses, elementwise (tanh has its own file)."""

from .._jax.op import apply
from ._pointwise import Unary
from .rsqrt import Rsqrt


class Sinh(Unary):
    """sinh(x), elementwise."""

    name = instr = "sinh"
    accepts = "float"
    primitives = ("sinh",)

    def slope(self, x, out):
        return apply(Cosh, x)


class Cosh(Unary):
    """cosh(x), elementwise."""

    name = instr = "cosh"
    accepts = "float"
    primitives = ("cosh",)

    def slope(self, x, out):
        return apply(Sinh, x)


class Asinh(Unary):
    """The inverse hyperbolic sine, elementwise."""

    name = instr = "asinh"
    accepts = "float"
    primitives = ("asinh",)

    def slope(self, x, out):
        return apply(Rsqrt, x * x + 1.0)


class Acosh(Unary):
    """The inverse hyperbolic cosine, elementwise."""

    name = instr = "acosh"
    accepts = "float"
    primitives = ("acosh",)

    def slope(self, x, out):  # as JAX writes it: 1 / sqrt((x - 1)(x + 1))
        return apply(Rsqrt, (x - 1.0) * (x + 1.0))


class Atanh(Unary):
    """The inverse hyperbolic tangent, elementwise."""

    name = instr = "atanh"
    accepts = "float"
    primitives = ("atanh",)

    def slope(self, x, out):
        return 1.0 / (1.0 - x * x)
