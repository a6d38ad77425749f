"""A new DiskArray of a given shape with every element equal to a scalar."""
from .._dtypes import dtype_code
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, scalar_type
from ._elementwise import reduce_to


class Fill(Op):
    name = "full"
    kernel = "fill"
    linear = True

    def out_type(self, value, *, shape, dtype):
        scalar_type(self.name, value)
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return (dtype_code(self.out_aval.dtype), *self.shape)

    def transpose_rule(self, ct, value):
        return reduce_to(ct, value)
