"""-x, elementwise."""
from ._elementwise import Elementwise


class Neg(Elementwise):
    name = "negative"
    instr = "neg"

    def vjp(self, ct, x, *, out, needs):
        return (-ct,)

    def tangent(self, out, operands, tangents):
        return -tangents[0]
