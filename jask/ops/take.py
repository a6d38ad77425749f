"""Rows of a DiskArray's leading axis at integer indices (x[idx], jnp.take(x, idx, axis=0)),
and the backward rule: the cotangent rows scatter-added into zeros of x's shape.

The indices are an in-memory integer array (int32, or int64 for very long axes), concrete or
traced. The engine wraps a negative index once and clamps what is still out of range to
[0, rows - 1], as XLA gathers do; jask.take checks concrete indices before that.
`Take` returns a DiskArray, `TakeInMemory` an in-memory jax.Array (jask.take picks by size).
"""

import jax

from .._dtypes import dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe


def _check_indices(op_name, indices):
    if (
        not isinstance(indices, compat.ShapedArray)
        or indices.ndim == 0
        or indices.dtype.name not in ("int32", "int64")
    ):
        raise TypeError(
            f"jask.{op_name}: the indices must be an int32 or int64 array of "
            f"rank >= 1, "
            f"got {describe(indices)}"
        )


def _aval(x):
    return x if isinstance(x, (DiskArrayTy, compat.ShapedArray)) else compat.typeof(x)


class Take(Op):
    name = "take"
    kernel = "take"
    linear = (0,)  # in x; the indices are indices

    def out_type(self, x, indices):
        _check_indices(self.name, indices)
        if not isinstance(x, DiskArrayTy) or x.ndim == 0:
            raise TypeError(
                f"jask.take: expected a DiskArray with a leading axis, got {describe(x)}"
            )
        return self.result_type((*indices.shape, *x.shape[1:]), x.dtype)

    def result_type(self, shape, dtype):
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        indices = self.in_avals[1]
        return {"index_itemsize": indices.dtype.itemsize, "index_shape": indices.shape}

    def transpose_rule(self, ct, x, indices):
        return apply(ScatterAddRows, ct, indices, shape=x.shape, dtype=x.dtype)


class TakeInMemory(Take):
    result = "in_memory"

    def result_type(self, shape, dtype):
        return compat.ShapedArray(shape, jax.dtypes.canonicalize_dtype(dtype))


class ScatterAddRows(Op):
    """zeros(shape, dtype) with rows[i] added at row indices[i]; rows on disk or in memory."""

    name = "scatter_add_rows"
    kernel = "scatter_add_rows"
    linear = (0,)  # in the rows

    def out_type(self, rows, indices, *, shape, dtype):
        _check_indices(self.name, indices)
        if tuple(rows.shape) != (*indices.shape, *shape[1:]) or rows.dtype != dtype:
            raise ValueError(
                f"jask.scatter_add_rows: rows {describe(rows)} do not match indices "
                f"{describe(indices)} into a "
                f"{dtype.name}[{','.join(map(str, shape))}] array"
            )
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {
            "dtype": dtype_code(self.dtype),
            "index_itemsize": self.in_avals[1].dtype.itemsize,
            "shape": self.shape,
        }

    def transpose_rule(self, ct, rows, indices):
        # the rows' cotangent has the rows' type: in memory or on disk
        gather = Take if isinstance(_aval(rows), DiskArrayTy) else TakeInMemory
        return apply(gather, ct, indices)
