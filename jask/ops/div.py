"""x / y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar on either side)."""
from ._elementwise import Elementwise


class Div(Elementwise):
    name = "divide"
    instr = "div"

    def slopes(self, x, y, out):
        return (lambda: 1.0 / y), (lambda: -out / y)
