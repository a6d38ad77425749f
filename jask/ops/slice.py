"""x[start:stop:step] on any axes (NumPy basic indexing without the int and None reshapes,
which jask.getitem adds as free reshapes). `selection` holds (start, step, count) per axis of
x; a negative step walks backwards.

`Slice` gives a DiskArray: a view of x's file (no copy) when the selected elements are one
contiguous range, a streamed copy otherwise (the engine decides). `SliceInMemory` gives an
in-memory jax.Array (jask.getitem picks by size). The backward rule places the cotangent
into zeros of x's shape (`Place`), whose backward rule is a slice again.

`Place` takes values (a DiskArray or an in-memory array of the selection's shape). The
engine's "place" kernel streams the output in blocks; each block's values are one
contiguous range of the values (steps are made positive first), and blocks the selection
does not reach are never written (they stay sparse zeros).
"""

import jax
import jax.numpy as jnp

from .._dtypes import dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe


def selected_shape(x, selection) -> tuple[int, ...]:
    """The shape of x[selection]; ValueError unless every selected index is inside x."""
    if len(selection) != x.ndim:
        raise ValueError(f"jask.slice: {len(selection)} axes selected of {describe(x)}")
    for axis, ((start, step, count), size) in enumerate(zip(selection, x.shape)):
        last = start + step * (count - 1)
        inside = 0 <= start < size and 0 <= last < size
        if count < 0 or (count > 1 and step == 0) or (count and not inside):
            raise ValueError(
                f"jask.slice: (start {start}, step {step}, count {count}) does not "
                f"fit "
                f"axis {axis} of {describe(x)}"
            )
    return tuple(count for _, _, count in selection)


class Slice(Op):
    name = "slice"
    kernel = "slice"
    linear = True

    def out_type(self, x, *, selection):
        return DiskArrayTy(selected_shape(x, selection), x.dtype)

    def kernel_params(self):
        start, step, count = zip(*self.selection) if self.selection else ((), (), ())
        return {"start": start, "step": step, "count": count}

    def transpose_rule(self, ct, x):
        return place(ct, x.shape, x.dtype, self.selection)


class SliceInMemory(Slice):
    result = "in_memory"

    def out_type(self, x, *, selection):
        return compat.ShapedArray(
            selected_shape(x, selection), jax.dtypes.canonicalize_dtype(x.dtype)
        )


def placement_params(out, parts, selections, *, base=False, fill=False, dynamic=False) -> dict:
    """The "place" kernel's params: output dtype and shape, whether each part is in memory,
    and the parts' (start, step, count) per axis, part after part. What lies outside the
    parts: the first array operand where `base`, the first scalar operand where `fill`, else
    zeros; where `dynamic` the last part's starts are the scalar operands after the fill."""
    axes = [axis for selection in selections for axis in selection]
    return {
        "dtype": dtype_code(out.dtype),
        "shape": out.shape,
        "in_memory": tuple(int(not isinstance(aval, DiskArrayTy)) for aval in parts),
        "start": tuple(a[0] for a in axes),
        "step": tuple(a[1] for a in axes),
        "count": tuple(a[2] for a in axes),
        "base": base,
        "fill": fill,
        "dynamic": dynamic,
    }


class Place(Op):
    name = "place"
    kernel = "place"
    linear = True

    def out_type(self, values, *, shape, dtype, selection):
        counts = tuple(count for _, _, count in selection)
        if tuple(values.shape) != counts or values.dtype != dtype or len(shape) != len(selection):
            raise ValueError(
                f"jask.place: values {describe(values)} do not fit the selection "
                f"{selection} of a {dtype.name}{list(shape)} array"
            )
        if any(step <= 0 and count > 1 for _, step, count in selection):
            raise ValueError(f"jask.place: selection {selection} needs positive steps")
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return placement_params(self.out_aval, self.in_avals, (self.selection,))

    def transpose_rule(self, ct, values):
        gather = Slice if isinstance(self.in_avals[0], DiskArrayTy) else SliceInMemory
        return apply(gather, ct, selection=self.selection)


def place(values, shape, dtype, selection):
    """zeros(shape, dtype) with `values` at `selection`; axes with negative steps are
    reversed first, so that the kernel sees positive steps only."""
    flipped = tuple(
        axis for axis, (_, step, count) in enumerate(selection) if step < 0 and count > 1
    )
    if flipped:
        values = _reversed(values, flipped)
        selection = tuple(
            (start + step * (count - 1), -step, count) if axis in flipped else (start, step, count)
            for axis, (start, step, count) in enumerate(selection)
        )
    if not isinstance(values, DiskArray) and values.dtype != dtype:
        values = values.astype(dtype)
    return apply(Place, values, shape=tuple(shape), dtype=dtype, selection=tuple(selection))


def _reversed(values, axes):
    if not isinstance(values, DiskArray):
        return jnp.flip(values, axes)
    selection = tuple(
        (n - 1, -1, n) if axis in axes else (0, 1, n) for axis, n in enumerate(values.shape)
    )
    return apply(Slice, values, selection=selection)
