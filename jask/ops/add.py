"""x + y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""
from ._elementwise import Elementwise


class Add(Elementwise):
    name = "add"
    instr = "add"

    def slopes(self, x, y, out):
        return 1, 1
