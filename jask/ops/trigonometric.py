"""The sine and cosine, elementwise (each is in the other's derivative)."""
from .._jax.op import apply
from ._elementwise import Elementwise


class Sin(Elementwise):
    name = "sin"
    instr = "sin"

    def slope(self, x, out):
        return apply(Cos, x)


class Cos(Elementwise):
    name = "cos"
    instr = "cos"

    def slope(self, x, out):
        return -apply(Sin, x)
