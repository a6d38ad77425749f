"""The hyperbolic tangent, elementwise."""
from ._elementwise import Elementwise


class Tanh(Elementwise):
    name = "tanh"
    instr = "tanh"

    def slope(self, x, out):
        return 1.0 - out * out
