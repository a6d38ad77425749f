"""Zeros of a given shape with values placed at a selection: the backward rule of a slice.

The values are a DiskArray or an in-memory array of the selection's shape. The engine's
"place" kernel streams the output in blocks; each block's values are one contiguous range
of the values (steps are made positive first), and blocks the selection does not reach
are never written (they stay sparse zeros).
"""
import jax.numpy as jnp

from .._dtypes import dtype_code
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe


def placement_params(out, parts, selections) -> tuple[int, ...]:
    """The "place" kernel's params: output dtype and shape, then per part whether it is in
    memory and its (start, step, count) per axis."""
    params = [dtype_code(out.dtype), out.ndim, *out.shape, len(parts)]
    for aval, selection in zip(parts, selections):
        params += [int(not isinstance(aval, DiskArrayTy)), *(v for axis in selection for v in axis)]
    return tuple(params)


class Place(Op):
    name = "place"
    kernel = "place"
    linear = True

    def out_type(self, values, *, shape, dtype, selection):
        counts = tuple(count for _, _, count in selection)
        if tuple(values.shape) != counts or values.dtype != dtype or len(shape) != len(selection):
            raise ValueError(f"jask.place: values {describe(values)} do not fit the selection "
                             f"{selection} of a {dtype.name}{list(shape)} array")
        if any(step <= 0 and count > 1 for _, step, count in selection):
            raise ValueError(f"jask.place: selection {selection} needs positive steps")
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return placement_params(self.out_aval, self.in_avals, (self.selection,))

    def transpose_rule(self, ct, values):
        from .slice import Slice, SliceDense  # each is the other's transpose
        gather = Slice if isinstance(self.in_avals[0], DiskArrayTy) else SliceDense
        return apply(gather, ct, selection=self.selection)


def place(values, shape, dtype, selection):
    """zeros(shape, dtype) with `values` at `selection`; axes with negative steps are
    reversed first, so that the kernel sees positive steps only."""
    flipped = tuple(axis for axis, (_, step, count) in enumerate(selection) if step < 0 and count > 1)
    if flipped:
        values = _reversed(values, flipped)
        selection = tuple((start + step * (count - 1), -step, count) if axis in flipped else (start, step, count)
                          for axis, (start, step, count) in enumerate(selection))
    if not isinstance(values, DiskArray) and values.dtype != dtype:
        values = values.astype(dtype)
    return apply(Place, values, shape=tuple(shape), dtype=dtype, selection=tuple(selection))


def _reversed(values, axes):
    if not isinstance(values, DiskArray):
        return jnp.flip(values, axes)
    from .slice import Slice
    selection = tuple((n - 1, -1, n) if axis in axes else (0, 1, n) for axis, n in enumerate(values.shape))
    return apply(Slice, values, selection=selection)
