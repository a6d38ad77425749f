"""The larger of x and y, elementwise; at ties the gradient is split evenly, as in JAX."""
from .._jax.op import add_terms
from ._elementwise import Elementwise
from .reduce import reduce_to


def _share(ct, first, second):
    """ct where first wins, half of it at ties."""
    wins = (first > second).astype(ct.dtype)
    ties = (first == second).astype(ct.dtype)
    return ct * (wins + ties * 0.5)


class Maximum(Elementwise):
    name = "maximum"
    instr = "max"

    def vjp(self, ct, x, y, *, out, needs):
        return (reduce_to(_share(ct, x, y), x) if needs[0] else None,
                reduce_to(_share(ct, y, x), y) if needs[1] else None)

    def tangent(self, out, operands, tangents):
        (x, y), (tx, ty) = operands, tangents
        return add_terms(None if tx is None else _share(tx, x, y),
                         None if ty is None else _share(ty, y, x))


class Minimum(Elementwise):
    name = "minimum"
    instr = "min"

    def vjp(self, ct, x, y, *, out, needs):
        return (reduce_to(_share(ct, y, x), x) if needs[0] else None,
                reduce_to(_share(ct, x, y), y) if needs[1] else None)

    def tangent(self, out, operands, tangents):
        (x, y), (tx, ty) = operands, tangents
        return add_terms(None if tx is None else _share(tx, y, x),
                         None if ty is None else _share(ty, x, y))
