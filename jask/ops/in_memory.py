"""The explicit bridges between disk and memory: a DiskArray read whole into an in-memory
jax.Array (`ToInMemory`, jask.materialize) and an in-memory array written to a new DiskArray
(`FromInMemory`); each is the other's backward rule."""

import jax

from .._dtypes import dtype_code, storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply


class ToInMemory(Op):
    name = "materialize"
    kernel = "to_in_memory"
    result = "in_memory"  # the whole array: the explicit bridge
    linear = True

    def out_type(self, x):
        return compat.ShapedArray(x.shape, jax.dtypes.canonicalize_dtype(x.dtype))

    def transpose_rule(self, ct, x):
        return apply(FromInMemory, ct.astype(x.dtype))


class FromInMemory(Op):
    name = "from_in_memory"
    kernel = "from_in_memory"
    linear = True
    scalars = "bytes"  # a 0-d array's bytes are copied like any other's

    def out_type(self, x):
        return DiskArrayTy(x.shape, storage_dtype(x.dtype))

    def kernel_params(self):
        return {"dtype": dtype_code(self.out_aval.dtype), "shape": self.out_aval.shape}

    def transpose_rule(self, ct, x):
        return apply(ToInMemory, ct).astype(x.dtype)
