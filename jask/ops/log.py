"""The natural logarithm, elementwise."""
from ._elementwise import Elementwise


class Log(Elementwise):
    name = "log"
    instr = "log"

    def vjp(self, ct, x, *, out, needs):
        return (ct / x,)

    def tangent(self, out, operands, tangents):
        return tangents[0] / operands[0]
