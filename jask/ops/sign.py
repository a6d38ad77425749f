"""The sign of x (-1, 0 or 1), elementwise; its derivative is zero."""
from ._elementwise import Elementwise


class Sign(Elementwise):
    name = "sign"
    instr = "sign"

    def vjp(self, ct, x, *, out, needs):
        return (None,)

    def tangent(self, out, operands, tangents):
        return None
