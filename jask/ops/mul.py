"""x * y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""

from ._pointwise import Binary


class Mul(Binary):
    name = "mul"
    instr = "mul"
    primitives = ("mul",)

    def slopes(self, x, y, out):
        return y, x
