"""Rows [start, start + count) of a DiskArray's leading axis, as an in-memory jax.Array.

`start` may be traced (a mini-batch index inside jit); like lax.dynamic_slice
it is clamped so that the rows stay inside the array. The backward rule is `PutRows`: a new
DiskArray of zeros with in-memory rows written at the (clamped) leading index, whose
backward rule is `Rows` again.
"""

from .._dtypes import dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe, scalar_type


class Rows(Op):
    name = "rows"
    kernel = "rows"
    linear = (0,)  # in x; the start is an index
    result = "in_memory"

    def out_type(self, x, start, *, count):
        scalar_type(self.name, start)
        if x.ndim == 0 or not 0 <= count <= x.shape[0]:
            raise ValueError(f"jask.rows: cannot take {count} rows of {describe(x)}")
        return compat.ShapedArray((count, *x.shape[1:]), x.dtype)

    def kernel_params(self):
        return {"count": self.count}

    def transpose_rule(self, ct, x, start):
        return apply(PutRows, ct, start, shape=x.shape, dtype=x.dtype)


class PutRows(Op):
    name = "put_rows"
    kernel = "put_rows"
    linear = (0,)  # in the rows; the start is an index

    def out_type(self, rows, start, *, shape, dtype):
        scalar_type(self.name, start)
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {"dtype": dtype_code(self.dtype), "shape": self.shape}

    def transpose_rule(self, ct, rows, start):
        return apply(Rows, ct, start, count=rows.shape[0])
