"""where(cond, x, y): x where cond is true, else y (jax.lax.select_n with two cases: cond a
bool or int32 DiskArray or scalar, the branches of one dtype, all broadcasting)."""

import numpy as np

from .._jax.diskarray import DiskArrayTy
from .._jax.op import apply, describe
from ._elementwise import Elementwise, common_dtype, operand_shape, scalar_like
from .reduce import reduce_to


class Where(Elementwise):
    name = "where"
    instr = "select"
    linear = (1, 2)  # in the branches; the condition has no derivative
    same_dtype = (1, 2)

    def out_type(self, cond, x, y):
        shape, _ = operand_shape(self.name, (cond, x, y))
        if np.dtype(cond.dtype) not in (np.dtype(np.bool_), np.dtype(np.int32)):
            raise TypeError(
                f"jask.where: the condition must be bool or int32, not {describe(cond)}"
            )
        return DiskArrayTy(shape, common_dtype(self.name, (x, y)))

    def transpose_rule(self, ct, cond, x, y, *, needs):
        return (
            None,
            reduce_to(apply(Where, cond, ct, zero_like(ct)), x) if needs[1] else None,
            reduce_to(apply(Where, cond, zero_like(ct), ct), y) if needs[2] else None,
        )


def zero_like(x):
    return scalar_like(0, x)
