"""x * y, elementwise (DiskArrays of one shape, or a DiskArray and a scalar)."""
from .._jax.op import add_terms
from ._elementwise import Elementwise
from .reduce import reduce_to


class Mul(Elementwise):
    name = "mul"
    instr = "mul"

    def vjp(self, ct, x, y, *, out, needs):
        return (reduce_to(ct * y, x) if needs[0] else None,
                reduce_to(ct * x, y) if needs[1] else None)

    def tangent(self, out, operands, tangents):
        (x, y), (tx, ty) = operands, tangents
        return add_terms(None if tx is None else tx * y, None if ty is None else x * ty)
