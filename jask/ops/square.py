"""x * x, elementwise."""
from ._elementwise import Elementwise


class Square(Elementwise):
    name = "square"
    instr = "square"

    def slope(self, x, out):
        return x * 2.0
