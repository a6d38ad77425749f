"""x / y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar on either side)."""
from ._elementwise import Elementwise, reduce_to


class Div(Elementwise):
    name = "divide"
    instr = "div"

    def vjp(self, ct, x, y, *, out, needs):
        return (reduce_to(ct / y, x) if needs[0] else None,
                reduce_to(-(ct * out) / y, y) if needs[1] else None)
