"""Trigonometric functions and their inverses, elementwise: sin, cos, tan, asin, acos, atan,
and atan2 of two operands."""

from .._jax.op import apply
from ._pointwise import Binary, Unary
from .rsqrt import Rsqrt


class Sin(Unary):
    name = "sin"
    instr = "sin"
    accepts = "float"
    primitives = ("sin",)

    def slope(self, x, out):
        return apply(Cos, x)


class Cos(Unary):
    name = "cos"
    instr = "cos"
    accepts = "float"
    primitives = ("cos",)

    def slope(self, x, out):
        return -apply(Sin, x)


class Tan(Unary):
    """tan(x), elementwise."""

    name = instr = "tan"
    accepts = "float"
    primitives = ("tan",)

    def slope(self, x, out):
        return 1.0 + out * out


class Asin(Unary):
    """The inverse sine, elementwise."""

    name = instr = "asin"
    accepts = "float"
    primitives = ("asin",)

    def slope(self, x, out):
        return apply(Rsqrt, 1.0 - x * x)


class Acos(Unary):
    """The inverse cosine, elementwise."""

    name = instr = "acos"
    accepts = "float"
    primitives = ("acos",)

    def slope(self, x, out):
        return -apply(Rsqrt, 1.0 - x * x)


class Atan(Unary):
    """The inverse tangent, elementwise."""

    name = instr = "atan"
    accepts = "float"
    primitives = ("atan",)

    def slope(self, x, out):
        return 1.0 / (1.0 + x * x)


class Atan2(Binary):
    """atan2(x, y), the angle of the point (y, x), elementwise."""

    name = instr = "atan2"
    accepts = "float"
    primitives = ("atan2",)

    def slopes(self, x, y, out):
        return (lambda: y / (x * x + y * y)), (lambda: -x / (x * x + y * y))
