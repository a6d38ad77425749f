"""x * x, elementwise."""
from ._elementwise import Elementwise


class Square(Elementwise):
    name = "square"
    instr = "square"

    def vjp(self, ct, x, *, out, needs):
        return ((ct * x) * 2.0,)
