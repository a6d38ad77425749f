"""-x, elementwise."""

from ._pointwise import Unary


class Neg(Unary):
    name = "negative"
    instr = "neg"
    primitives = ("neg",)

    def slope(self, x, out):
        return -1
