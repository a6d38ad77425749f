"""x * y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""
from ._elementwise import Elementwise, reduce_to


class Mul(Elementwise):
    name = "mul"
    instr = "mul"

    def vjp(self, ct, x, y, *, out, needs):
        return (reduce_to(ct * y, x) if needs[0] else None,
                reduce_to(ct * x, y) if needs[1] else None)
