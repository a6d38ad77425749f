"""Rows of DiskArrays written in place as one step (the row-sparse optimizer's update,
jask.row_sparse): its results are its targets, the same files under new handles.

The operands are the targets, an in-memory int32 or int64 row list (ascending and distinct, then -1 in
unused slots: under jit the number of distinct rows of a batch is not static) and, per target,
its new rows, one per slot. Returning the targets orders the write under jit: every later use of
a target reads the op's result, so it runs after the write, and the write runs after the reads
its new rows were computed from.
"""

from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, describe


class WriteRows(Op):
    name = "write_rows"
    kernel = "write_rows"
    result = "arrays"
    zero_derivative = True  # a write, not a function of the values to differentiate

    def out_type(self, *operands):
        n = (len(operands) - 1) // 2
        targets, rows, values = operands[:n], operands[n], operands[n + 1 :]
        if n == 0 or len(values) != n:
            raise TypeError(
                f"jask.write_rows: expected targets, rows and one value per target, "
                f"got {len(operands)} operands"
            )
        if (
            not isinstance(rows, compat.ShapedArray)
            or rows.ndim != 1
            or rows.dtype.name not in ("int32", "int64")
        ):
            raise TypeError(
                f"jask.write_rows: the rows must be an int32 or int64 vector, got {describe(rows)}"
            )
        for target, value in zip(targets, values):
            if not isinstance(target, DiskArrayTy) or target.ndim == 0:
                raise TypeError(
                    f"jask.write_rows: a target must be a DiskArray with rows, got "
                    f"{describe(target)}"
                )
            if (
                not isinstance(value, compat.ShapedArray)
                or tuple(value.shape) != (rows.shape[0], *target.shape[1:])
                or value.dtype != target.dtype
            ):
                raise ValueError(
                    f"jask.write_rows: new rows {describe(value)} do not fit {rows.shape[0]} rows "
                    f"of {describe(target)}"
                )
        return tuple(DiskArrayTy(t.shape, t.dtype) for t in targets)

    def kernel_params(self):
        n = (len(self.in_avals) - 1) // 2
        return {"index_itemsize": self.in_avals[n].dtype.itemsize}
