"""x ** y, elementwise (y a scalar or a DiskArray of x's shape)."""
from .._jax.op import apply
from ._elementwise import Elementwise
from .log import Log


class Pow(Elementwise):
    name = "power"
    instr = "pow"

    def slopes(self, x, y, out):
        return (lambda: y * apply(Pow, x, y - 1.0)), (lambda: out * apply(Log, x))
