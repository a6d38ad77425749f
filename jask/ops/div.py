"""x / y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar on either side)."""

from ._pointwise import Binary


class Div(Binary):
    name = "divide"
    instr = "div"
    primitives = ("div",)

    def slopes(self, x, y, out):
        return (lambda: 1.0 / y), (lambda: -out / y)
