"""x ** y, elementwise (y a scalar or a DiskArray of x's shape): jax.lax.pow, whose exponent
may also be an integer array (it is then converted to x's dtype, exactly for the powers a
float represents)."""

import jax.numpy as jnp

from .._jax.op import apply
from ._pointwise import Binary
from .log import Log


class Pow(Binary):
    name = "power"
    instr = "pow"
    accepts = "float"
    primitives = ("pow",)

    @classmethod
    def from_primitive(cls, x, y):
        if jnp.issubdtype(y.dtype, jnp.integer) and jnp.issubdtype(x.dtype, jnp.floating):
            y = y.astype(x.dtype)
        return apply(cls, x, y)

    def slopes(self, x, y, out):
        return (lambda: y * apply(Pow, x, y - 1.0)), (lambda: out * apply(Log, x))
