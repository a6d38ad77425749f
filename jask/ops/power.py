"""x ** y, elementwise (y a scalar or a DiskArray of x's shape)."""

from .._jax.op import apply
from ._pointwise import Binary
from .log import Log


class Pow(Binary):
    name = "power"
    instr = "pow"
    numpy_names = ("jnp.power", "jnp.pow", "lax.pow")
    primitives = ("pow",)

    def slopes(self, x, y, out):
        return (lambda: y * apply(Pow, x, y - 1.0)), (lambda: out * apply(Log, x))
