"""The square root, elementwise."""

from ._pointwise import Unary


class Sqrt(Unary):
    name = "sqrt"
    instr = "sqrt"
    numpy_names = ("jnp.sqrt", "lax.sqrt")
    primitives = ("sqrt",)

    def slope(self, x, out):
        return 0.5 / out
