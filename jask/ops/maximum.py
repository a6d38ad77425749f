"""The larger of x and y, elementwise; at ties the gradient is split evenly, as in JAX."""

from ._pointwise import Binary


def _share(first, second, dtype):
    """1 where first wins, 0.5 at ties, 0 elsewhere."""
    return (first > second).astype(dtype) + (first == second).astype(dtype) * 0.5


class Maximum(Binary):
    name = "maximum"
    instr = "max"
    accepts = "any"
    primitives = ("max",)

    def slopes(self, x, y, out):
        dtype = self.out_aval.dtype
        return (lambda: _share(x, y, dtype)), (lambda: _share(y, x, dtype))


class Minimum(Binary):
    name = "minimum"
    instr = "min"
    accepts = "any"
    primitives = ("min",)

    def slopes(self, x, y, out):
        dtype = self.out_aval.dtype
        return (lambda: _share(y, x, dtype)), (lambda: _share(x, y, dtype))
