"""1 / sqrt(x), elementwise."""

from ._pointwise import Unary


class Rsqrt(Unary):
    name = "rsqrt"
    instr = "rsqrt"
    accepts = "float"
    primitives = ("rsqrt",)

    def slope(self, x, out):
        return (out / x) * -0.5
