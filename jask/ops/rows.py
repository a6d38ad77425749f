"""Rows [start, start + count) of a DiskArray's leading axis, as an in-memory jax.Array.

`start` may be traced (a mini-batch index inside jit); like lax.dynamic_slice
it is clamped so that the rows stay inside the array.
"""
from .._jax import compat
from .._jax.op import Op, apply, describe, scalar_type
from .put_rows import PutRows


class Rows(Op):
    name = "rows"
    kernel = "rows"
    result = "in_memory"

    def out_type(self, x, start, *, count):
        scalar_type(self.name, start)
        if x.ndim == 0 or not 0 <= count <= x.shape[0]:
            raise ValueError(f"jask.rows: cannot take {count} rows of {describe(x)}")
        return compat.ShapedArray((count, *x.shape[1:]), x.dtype)

    def kernel_params(self):
        return {"count": self.count}

    def vjp(self, ct, x, start, *, out, needs):
        return apply(PutRows, ct, start, shape=x.shape, dtype=x.dtype), None

    def tangent(self, out, operands, tangents):
        return None if tangents[0] is None else apply(Rows, tangents[0], operands[1], count=self.count)
