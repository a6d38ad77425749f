"""x - y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""
from .._jax.op import add_terms
from ._elementwise import Elementwise
from .reduce import reduce_to


class Sub(Elementwise):
    name = "sub"
    instr = "sub"

    def vjp(self, ct, x, y, *, out, needs):
        return reduce_to(ct, x), reduce_to(-ct, y) if needs[1] else None

    def tangent(self, out, operands, tangents):
        tx, ty = tangents
        return add_terms(tx, None if ty is None else -ty)
