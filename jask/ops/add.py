"""x + y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""

from ._pointwise import Binary


class Add(Binary):
    name = "add"
    instr = "add"
    primitives = ("add",)

    def slopes(self, x, y, out):
        return 1, 1
