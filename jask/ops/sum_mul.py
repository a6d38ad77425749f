"""sum(x * y) over two DiskArrays of one shape (a full inner product), as a 0-d jax.Array."""
import jax

from .._jax import compat
from .._jax.op import Op, apply, same_type


class SumMul(Op):
    name = "vdot"
    kernel = "sum_mul"
    result = "scalar"

    def out_type(self, x, y):
        same_type(self.name, x, y)
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(x.dtype))

    def vjp(self, ct, x, y, *, out, needs):
        from .scale import Scale, scalar_like  # scale's own backward rule uses SumMul
        return (apply(Scale, y, scalar_like(ct, y)) if needs[0] else None,
                apply(Scale, x, scalar_like(ct, x)) if needs[1] else None)
