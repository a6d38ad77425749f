"""|x|, elementwise."""
from .._jax.op import apply
from ._elementwise import Elementwise, scalar_like


class Abs(Elementwise):
    name = "abs"
    instr = "abs"

    def slope(self, x, out):  # 1 for x >= 0 (as in JAX, which treats |x| as x at 0), -1 below
        from .where import Where
        return apply(Where, x >= 0.0, scalar_like(1, x), scalar_like(-1, x))
