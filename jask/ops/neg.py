"""-x, elementwise."""
from ._elementwise import Elementwise


class Neg(Elementwise):
    name = "negative"
    instr = "neg"

    def slope(self, x, out):
        return -1
