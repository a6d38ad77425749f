"""x - y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""
from ._elementwise import Elementwise, reduce_to


class Sub(Elementwise):
    name = "sub"
    instr = "sub"

    def vjp(self, ct, x, y, *, out, needs):
        return reduce_to(ct, x), reduce_to(-ct, y) if needs[1] else None
