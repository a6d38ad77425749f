"""where(cond, x, y): x where cond is true, else y; each a DiskArray of one shape or a scalar."""

import jax
import numpy as np

from .._jax.diskarray import DiskArrayTy
from .._jax.op import apply
from ._elementwise import Elementwise, common_dtype, operand_shape, scalar_like
from .reduce import reduce_to


class Where(Elementwise):
    name = "where"
    instr = "select"
    linear = (1, 2)  # in the branches; the condition has no derivative

    def out_type(self, cond, x, y):
        shape, _ = operand_shape(self.name, (cond, x, y))
        branches = [a for a in (x, y) if isinstance(a, DiskArrayTy)]
        dtype = (
            common_dtype(self.name, branches)
            if branches
            else np.dtype(jax.dtypes.canonicalize_dtype(x.dtype))
        )
        return DiskArrayTy(shape, dtype)

    def transpose_rule(self, ct, cond, x, y, *, needs):
        return (
            None,
            reduce_to(apply(Where, cond, ct, zero_like(ct)), x) if needs[1] else None,
            reduce_to(apply(Where, cond, zero_like(ct), ct), y) if needs[2] else None,
        )


def zero_like(x):
    return scalar_like(0, x)
