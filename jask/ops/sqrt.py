"""The square root, elementwise."""

from ._pointwise import Unary


class Sqrt(Unary):
    name = "sqrt"
    instr = "sqrt"
    accepts = "float"
    primitives = ("sqrt",)

    def slope(self, x, out):
        return 0.5 / out


class Cbrt(Unary):
    """The cube root, elementwise."""

    name = instr = "cbrt"
    accepts = "float"
    primitives = ("cbrt",)

    def slope(self, x, out):  # as JAX writes it: (1/3) out^-2
        return 1.0 / (out * out * 3.0)
