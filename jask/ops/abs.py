"""|x|, elementwise."""

from .._jax.op import apply
from ._elementwise import scalar_like
from ._pointwise import Unary
from .where import Where


class Abs(Unary):
    name = "abs"
    instr = "abs"
    primitives = ("abs",)

    def slope(self, x, out):  # 1 for x >= 0 (as in JAX, which treats |x| as x at 0), -1 below
        return apply(Where, x >= 0.0, scalar_like(1, x), scalar_like(-1, x))
