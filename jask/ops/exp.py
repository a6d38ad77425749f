"""e ** x, elementwise."""
from ._elementwise import Elementwise


class Exp(Elementwise):
    name = "exp"
    instr = "exp"

    def slope(self, x, out):
        return out
