"""1 / sqrt(x), elementwise."""
from ._elementwise import Elementwise


class Rsqrt(Elementwise):
    name = "rsqrt"
    instr = "rsqrt"

    def slope(self, x, out):
        return (out / x) * -0.5
