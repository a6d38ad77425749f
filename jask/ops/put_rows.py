"""A new DiskArray of zeros with in-memory rows written at a (clamped) leading index:
the backward rule of Rows."""
from .._dtypes import dtype_code
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, scalar_type


class PutRows(Op):
    name = "put_rows"
    kernel = "put_rows"

    def out_type(self, rows, start, *, shape, dtype):
        scalar_type(self.name, start)
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {"dtype": dtype_code(self.dtype), "shape": self.shape}

    def vjp(self, ct, rows, start, *, out, needs):
        from .rows import Rows
        return apply(Rows, ct, start, count=rows.shape[0]), None

    def tangent(self, out, operands, tangents):
        if tangents[0] is None:
            return None
        return apply(PutRows, tangents[0], operands[1], shape=self.shape, dtype=self.dtype)
