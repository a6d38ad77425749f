"""The same elements in C order with another shape: a view of the same file, no copy."""

import math

from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe


class Reshape(Op):
    name = "reshape"
    kernel = "reshape"
    linear = True

    def out_type(self, x, *, shape):
        if math.prod(shape) != x.size:
            raise ValueError(
                f"jask.reshape: cannot reshape {describe(x)} to {shape}: "
                f"the sizes differ ({x.size} vs {math.prod(shape)})"
            )
        return DiskArrayTy(shape, x.dtype)

    def kernel_params(self):
        return {"shape": self.shape}

    def transpose_rule(self, ct, x):
        return apply(Reshape, ct, shape=x.shape)
