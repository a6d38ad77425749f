"""x[start:stop:step] on any axes (NumPy basic indexing without the int and None reshapes,
which jask.getitem adds as free reshapes). `selection` holds (start, step, count) per axis of
x; a negative step walks backwards.

`Slice` gives a DiskArray: a view of x's file (no copy) when the selected elements are one
contiguous range, a streamed copy otherwise (the engine decides). `SliceDense` gives an
in-memory jax.Array (jask.getitem picks by size). The backward rule places the cotangent
into zeros of x's shape (`Place`).
"""
import jax

from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe


def selected_shape(x, selection) -> tuple[int, ...]:
    """The shape of x[selection]; ValueError unless every selected index is inside x."""
    if len(selection) != x.ndim:
        raise ValueError(f"jask.slice: {len(selection)} axes selected of {describe(x)}")
    for axis, ((start, step, count), size) in enumerate(zip(selection, x.shape)):
        last = start + step * (count - 1)
        if count < 0 or (count > 1 and step == 0) or (count and not (0 <= start < size and 0 <= last < size)):
            raise ValueError(f"jask.slice: (start {start}, step {step}, count {count}) does not fit "
                             f"axis {axis} of {describe(x)}")
    return tuple(count for _, _, count in selection)


class Slice(Op):
    name = "slice"
    kernel = "slice"

    def out_type(self, x, *, selection):
        return DiskArrayTy(selected_shape(x, selection), x.dtype)

    def kernel_params(self):
        start, step, count = zip(*self.selection) if self.selection else ((), (), ())
        return {"start": start, "step": step, "count": count}

    def vjp(self, ct, x, *, out, needs):
        from .place import place
        return (place(ct, x.shape, x.dtype, self.selection),)

    def tangent(self, out, operands, tangents):
        return apply(type(self), tangents[0], selection=self.selection)


class SliceDense(Slice):
    result = "in_memory"

    def out_type(self, x, *, selection):
        return compat.ShapedArray(selected_shape(x, selection), jax.dtypes.canonicalize_dtype(x.dtype))
