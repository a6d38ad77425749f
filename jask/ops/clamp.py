"""clamp(lo, x, hi) = min(max(x, lo), hi), elementwise (jax.lax.clamp: lo and hi are scalars
or arrays of x's shape; NaN propagates)."""

from .._jax.op import apply
from ._elementwise import scalar_like
from ._pointwise import Pointwise
from .where import Where


def _passes(condition, like):
    """1 where condition holds, else 0, in like's dtype."""
    return apply(Where, condition, scalar_like(1, like), scalar_like(0, like))


class Clamp(Pointwise):
    name = instr = "clamp"
    primitives = ("clamp",)

    def slopes(self, lo, x, hi, out):  # as JAX's clamp_p: each bound where it binds
        return (
            lambda: _passes((lo > x) & (lo < hi), out),
            lambda: _passes((x > lo) & (x < hi), out),
            lambda: _passes(hi < x, out),
        )
