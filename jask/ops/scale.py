"""x * s for a DiskArray x and a scalar s (Python, NumPy or 0-d JAX, traced or not)."""
import jax
import jax.numpy as jnp

from .._jax.op import Op, apply, scalar_type
from .sum_mul import SumMul


def scalar_like(s, x):
    """`s` as a 0-d array of x's dtype (as JAX can hold it: float64 needs x64),
    the scalar operand of Scale and friends."""
    return jnp.asarray(s, dtype=jax.dtypes.canonicalize_dtype(x.dtype))


class Scale(Op):
    name = "scale"
    kernel = "scale"

    def out_type(self, x, s):
        scalar_type(self.name, s)
        return x

    def vjp(self, ct, x, s, *, out, needs):
        return (apply(Scale, ct, s) if needs[0] else None,
                apply(SumMul, ct, x).astype(s.dtype) if needs[1] else None)
