"""1 / sqrt(x), elementwise."""
from ._elementwise import Elementwise


class Rsqrt(Elementwise):
    name = "rsqrt"
    instr = "rsqrt"

    def vjp(self, ct, x, *, out, needs):
        return (((ct * out) / x) * -0.5,)

    def tangent(self, out, operands, tangents):
        return ((tangents[0] * out) / operands[0]) * -0.5
