"""x spread into a larger array filled with a padding value (lax.pad without negative
padding, which jask/_api/lax_shape.py applies as a slice): axis d of x lands at
start, start + step, ..., `count` of them, of the output's axis d (step - 1 is lax's interior
padding). The engine's "place" kernel writes x at that selection and the padding value
everywhere else, streaming the output in blocks.

Linear in x and the padding value together: the cotangent of x is its selection of the
output's cotangent, that of the padding value the sum of the rest.
"""

from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe
from .reduce import reduce_to
from .slice import Slice, placement_params, selected_shape


class Pad(Op):
    name = "pad"
    kernel = "place"
    linear = True

    def out_type(self, x, padding_value, *, shape, selection):
        if not isinstance(x, DiskArrayTy):
            raise TypeError(f"jask.pad: expected a DiskArray to pad, got {describe(x)}")
        if not isinstance(padding_value, compat.ShapedArray) or padding_value.ndim:
            raise TypeError(
                f"jask.pad: the padding value must be an in-memory scalar, got "
                f"{describe(padding_value)}"
            )
        zeros = DiskArrayTy(tuple(shape), x.dtype)
        if selected_shape(zeros, selection) != tuple(x.shape) or any(
            step < 1 for _, step, _ in selection
        ):
            raise ValueError(
                f"jask.pad: {describe(x)} does not fit the selection {selection} of a "
                f"{x.dtype.name}{list(shape)} array"
            )
        return zeros

    def kernel_params(self):
        return placement_params(self.out_aval, self.in_avals[:1], (self.selection,), fill=True)

    def transpose_rule(self, ct, x, padding_value, *, needs):
        inside = apply(Slice, ct, selection=self.selection)
        outside = None
        if needs[1]:
            outside = reduce_to(ct, padding_value) - reduce_to(inside, padding_value)
        return (inside if needs[0] else None), outside
