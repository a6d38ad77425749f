"""A dense array written to a new DiskArray."""
from .._dtypes import dtype_code, storage_dtype
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply


class FromDense(Op):
    name = "from_dense"
    kernel = "from_dense"
    linear = True

    def out_type(self, x):
        return DiskArrayTy(x.shape, storage_dtype(x.dtype))

    def kernel_params(self):
        return (dtype_code(self.out_aval.dtype), *self.out_aval.shape)

    def transpose_rule(self, ct, x):
        from .to_dense import ToDense
        return apply(ToDense, ct).astype(x.dtype)
