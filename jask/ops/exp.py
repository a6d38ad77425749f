"""e ** x, elementwise."""
from ._elementwise import Elementwise


class Exp(Elementwise):
    name = "exp"
    instr = "exp"

    def vjp(self, ct, x, *, out, needs):
        return (ct * out,)

    def tangent(self, out, operands, tangents):
        return tangents[0] * out
