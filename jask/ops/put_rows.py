"""A new DiskArray of zeros with in-memory rows written at a (clamped) leading index:
the backward rule of Rows."""
from .._dtypes import dtype_code
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, scalar_type


class PutRows(Op):
    name = "put_rows"
    kernel = "put_rows"
    linear = (0,)  # in the rows; the start is an index

    def out_type(self, rows, start, *, shape, dtype):
        scalar_type(self.name, start)
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return (dtype_code(self.dtype), *self.shape)

    def transpose_rule(self, ct, rows, start):
        from .rows import Rows
        return apply(Rows, ct, start, count=rows.shape[0])
