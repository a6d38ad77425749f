"""The larger of x and y, elementwise; at ties the gradient is split evenly, as in JAX."""
from ._elementwise import Elementwise, reduce_to


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


class Minimum(Elementwise):
    name = "minimum"
    instr = "min"

    def vjp(self, ct, x, y, *, out, needs):
        return (reduce_to(_share(ct, y, x), x) if needs[0] else None,
                reduce_to(_share(ct, x, y), y) if needs[1] else None)
