"""The natural logarithm, elementwise."""

from ._pointwise import Unary


class Log(Unary):
    name = "log"
    instr = "log"
    accepts = "float"
    primitives = ("log",)

    def slope(self, x, out):
        return 1.0 / x
