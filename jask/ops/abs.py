"""|x|, elementwise."""
from .._jax.op import apply
from ._elementwise import Elementwise
from .sign import Sign


class Abs(Elementwise):
    name = "abs"
    instr = "abs"

    def vjp(self, ct, x, *, out, needs):
        return (ct * apply(Sign, x),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * apply(Sign, operands[0])
