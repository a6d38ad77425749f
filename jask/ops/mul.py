"""x * y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""
from ._elementwise import Elementwise


class Mul(Elementwise):
    name = "mul"
    instr = "mul"

    def slopes(self, x, y, out):
        return y, x
