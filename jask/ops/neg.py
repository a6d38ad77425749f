"""-x, elementwise."""

from ._pointwise import Unary


class Neg(Unary):
    name = "negative"
    instr = "neg"
    numpy_names = ("jnp.negative", "lax.neg")
    primitives = ("neg",)

    def slope(self, x, out):
        return -1
