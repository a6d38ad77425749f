"""The explicit bridge: a DiskArray read whole into an in-memory jax.Array."""
import jax

from .._jax import compat
from .._jax.op import Op, apply


class ToDense(Op):
    name = "materialize"
    kernel = "materialize"
    result = "in_memory"  # the whole array: the explicit bridge

    def out_type(self, x):
        return compat.ShapedArray(x.shape, jax.dtypes.canonicalize_dtype(x.dtype))

    def vjp(self, ct, x, *, out, needs):
        from .from_dense import FromDense  # each is the other's backward rule
        return (apply(FromDense, ct.astype(x.dtype)),)

    def tangent(self, out, operands, tangents):
        return apply(ToDense, tangents[0])
