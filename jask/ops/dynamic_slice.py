"""lax.dynamic_slice and lax.dynamic_update_slice with start indices that are in-memory
scalars, concrete or traced. As XLA does, the engine clamps each start so that the selection
stays inside the array ("dynamic_slice", and the "place" kernel with `dynamic` starts).

`DynamicSlice` gives a DiskArray (a view of x's file when the selection is one contiguous
range), `DynamicSliceInMemory` an in-memory jax.Array. `DynamicUpdateSlice` writes a new
DiskArray: the operand's elements, with the update's (on disk or in memory) at the clamped
starts. Each is the other's backward rule.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe, scalar_type
from .reduce import filled
from .slice import placement_params


def _check_starts(op_name, x, starts):
    if len(starts) != x.ndim:
        raise ValueError(f"jask.{op_name}: {len(starts)} start indices for {describe(x)}")
    for start in starts:
        scalar_type(op_name, start)


class DynamicSlice(Op):
    name = "dynamic_slice"
    kernel = "dynamic_slice"
    linear = (0,)  # in x; the starts are indices

    def out_type(self, x, *starts, sizes):
        _check_starts(self.name, x, starts)
        if len(sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(sizes, x.shape)):
            raise ValueError(f"jask.dynamic_slice: slice sizes {sizes} do not fit {describe(x)}")
        return self.result_type(tuple(sizes), x.dtype)

    def result_type(self, shape, dtype):
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return {"count": self.sizes}

    def transpose_rule(self, ct, x, *starts):
        zeros = filled(np.zeros((), x.dtype), x.shape, x.dtype)  # complex too
        return apply(DynamicUpdateSlice, zeros, ct, *starts)


class DynamicSliceInMemory(DynamicSlice):
    result = "in_memory"

    def result_type(self, shape, dtype):
        return compat.ShapedArray(shape, jax.dtypes.canonicalize_dtype(dtype))


class DynamicUpdateSlice(Op):
    name = "dynamic_update_slice"
    kernel = "place"
    linear = (0, 1)  # in the operand and the update together; the starts are indices

    def out_type(self, operand, update, *starts):
        _check_starts(self.name, operand, starts)
        if not isinstance(operand, DiskArrayTy):
            raise TypeError(
                f"jask.dynamic_update_slice: expected a DiskArray operand, got {describe(operand)}"
            )
        if (
            update.ndim != operand.ndim
            or any(u > n for u, n in zip(update.shape, operand.shape))
            or update.dtype != operand.dtype
        ):
            raise ValueError(
                f"jask.dynamic_update_slice: the update {describe(update)} does not fit "
                f"{describe(operand)}"
            )
        return DiskArrayTy(operand.shape, operand.dtype)

    def kernel_params(self):
        update = self.in_avals[1]
        selection = tuple((0, 1, n) for n in update.shape)
        return placement_params(self.out_aval, (update,), (selection,), base=True, dynamic=True)

    def transpose_rule(self, ct, operand, update, *starts, needs):
        on_disk = isinstance(update, (DiskArray, DiskArrayTy))
        shape = tuple(update.shape)
        update_ct = operand_ct = None
        if needs[1]:  # the update's cotangent has the update's type: on disk or in memory
            gather = DynamicSlice if on_disk else DynamicSliceInMemory
            update_ct = apply(gather, ct, *starts, sizes=shape)
        if needs[0]:  # the operand's: the output's, zero where the update went
            if on_disk:
                zeros = filled(np.zeros((), update.dtype), shape, update.dtype)
            else:
                zeros = jnp.zeros(shape, update.dtype)
            operand_ct = apply(DynamicUpdateSlice, ct, zeros, *starts)
        return (operand_ct, update_ct) + (None,) * len(starts)
