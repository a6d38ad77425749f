"""A new DiskArray of a given shape with every element equal to a scalar."""
from .._dtypes import dtype_code
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, scalar_type
from ._elementwise import reduce_to


class Fill(Op):
    name = "full"
    kernel = "fill"

    def out_type(self, value, *, shape, dtype):
        scalar_type(self.name, value)
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {"dtype": dtype_code(self.out_aval.dtype), "shape": self.shape}

    def vjp(self, ct, value, *, out, needs):
        return (reduce_to(ct, value),)

    def tangent(self, out, operands, tangents):
        from .._jax.op import apply
        return apply(Fill, tangents[0], shape=self.shape, dtype=self.dtype)
