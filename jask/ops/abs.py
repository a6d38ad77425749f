"""|x|, elementwise."""
from .._jax.op import apply
from ._elementwise import Elementwise
from .where import Where, zero_like


def _slope(x, like):
    """d|x|/dx: 1 for x >= 0 (as in JAX, which treats |x| as x at 0), -1 below."""
    one = zero_like(like) + 1.0
    return apply(Where, x >= 0.0, one, -one)


class Abs(Elementwise):
    name = "abs"
    instr = "abs"

    def vjp(self, ct, x, *, out, needs):
        return (ct * _slope(x, ct),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * _slope(operands[0], tangents[0])
