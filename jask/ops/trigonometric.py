"""The sine and cosine, elementwise (each is in the other's derivative)."""

from .._jax.op import apply
from ._pointwise import Unary


class Sin(Unary):
    name = "sin"
    instr = "sin"
    numpy_names = ("jnp.sin", "lax.sin")
    primitives = ("sin",)

    def slope(self, x, out):
        return apply(Cos, x)


class Cos(Unary):
    name = "cos"
    instr = "cos"
    numpy_names = ("jnp.cos", "lax.cos")
    primitives = ("cos",)

    def slope(self, x, out):
        return -apply(Sin, x)
