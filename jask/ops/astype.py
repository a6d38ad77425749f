"""x converted to another storage dtype, elementwise."""

from .._dtypes import storage_dtype
from .._jax.diskarray import DiskArrayTy
from .._jax.op import apply
from ._elementwise import Elementwise, operand_shape


class Astype(Elementwise):
    name = "astype"
    instr = "copy"
    linear = True

    def out_type(self, x, *, dtype):
        shape, _ = operand_shape(self.name, (x,))
        return DiskArrayTy(shape, storage_dtype(dtype))

    def transpose_rule(self, ct, x):
        return apply(Astype, ct, dtype=x.dtype)
