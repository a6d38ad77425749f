"""An in-memory array written to a new DiskArray."""
from .._dtypes import dtype_code, storage_dtype
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply


class FromDense(Op):
    name = "from_memory"
    kernel = "from_memory"

    def out_type(self, x):
        return DiskArrayTy(x.shape, storage_dtype(x.dtype))

    def kernel_params(self):
        return {"dtype": dtype_code(self.out_aval.dtype), "shape": self.out_aval.shape}

    def vjp(self, ct, x, *, out, needs):
        from .to_dense import ToDense
        return (apply(ToDense, ct).astype(x.dtype),)

    def tangent(self, out, operands, tangents):
        return apply(FromDense, tangents[0].astype(self.out_aval.dtype))
