"""The explicit bridge: a DiskArray read whole into an in-memory jax.Array."""
import jax

from .._jax import compat
from .._jax.op import Op, apply


class ToDense(Op):
    name = "materialize"
    kernel = "to_dense"
    result = "dense"  # the whole array: the explicit bridge
    linear = True

    def out_type(self, x):
        return compat.ShapedArray(x.shape, jax.dtypes.canonicalize_dtype(x.dtype))

    def transpose_rule(self, ct, x):
        from .from_dense import FromDense  # each is the other's transpose
        return apply(FromDense, ct.astype(x.dtype))
