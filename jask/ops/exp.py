"""e ** x, elementwise."""

import math

from ._pointwise import Unary


class Exp(Unary):
    name = "exp"
    instr = "exp"
    accepts = "float"
    primitives = ("exp",)

    def slope(self, x, out):
        return out


class Exp2(Unary):
    """2 ** x, elementwise."""

    name = instr = "exp2"
    accepts = "float"
    primitives = ("exp2",)

    def slope(self, x, out):
        return out * math.log(2.0)
