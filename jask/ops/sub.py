"""x - y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""

from ._pointwise import Binary


class Sub(Binary):
    name = "sub"
    instr = "sub"
    primitives = ("sub",)

    def slopes(self, x, y, out):
        return 1, -1
