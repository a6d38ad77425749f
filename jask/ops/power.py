"""x ** y, elementwise (y a scalar or a DiskArray of x's shape)."""
from .._jax.op import add_terms, apply
from ._elementwise import Elementwise
from .log import Log
from .reduce import reduce_to


class Pow(Elementwise):
    name = "power"
    instr = "pow"

    def vjp(self, ct, x, y, *, out, needs):
        gx = reduce_to(ct * (y * apply(Pow, x, y - 1.0)), x) if needs[0] else None
        gy = reduce_to((ct * out) * apply(Log, x), y) if needs[1] else None
        return gx, gy

    def tangent(self, out, operands, tangents):
        (x, y), (tx, ty) = operands, tangents
        return add_terms(None if tx is None else tx * (y * apply(Pow, x, y - 1.0)),
                         None if ty is None else ty * (out * apply(Log, x)))
