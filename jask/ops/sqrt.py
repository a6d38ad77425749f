"""The square root, elementwise."""
from ._elementwise import Elementwise


class Sqrt(Elementwise):
    name = "sqrt"
    instr = "sqrt"

    def vjp(self, ct, x, *, out, needs):
        return ((ct * 0.5) / out,)

    def tangent(self, out, operands, tangents):
        return (tangents[0] * 0.5) / out
