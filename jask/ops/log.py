"""The natural logarithm, elementwise."""
from ._elementwise import Elementwise


class Log(Elementwise):
    name = "log"
    instr = "log"

    def slope(self, x, out):
        return 1.0 / x
