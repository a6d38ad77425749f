"""The square root, elementwise."""
from ._elementwise import Elementwise


class Sqrt(Elementwise):
    name = "sqrt"
    instr = "sqrt"

    def slope(self, x, out):
        return 0.5 / out
