"""The hyperbolic tangent, elementwise."""

from ._pointwise import Unary


class Tanh(Unary):
    name = "tanh"
    instr = "tanh"
    accepts = "float"
    primitives = ("tanh",)

    def slope(self, x, out):
        return 1.0 - out * out
