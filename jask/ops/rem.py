"""The remainder of x / y with the sign of x (C's fmod; jax.lax.rem), elementwise; on int32
as XLA computes it: x % 0 is x, INT32_MIN % -1 is 0."""

from .._jax.op import apply
from ._pointwise import Binary
from .rounding import Floor
from .sign import Sign


class Rem(Binary):
    name = instr = "rem"
    primitives = ("rem",)

    def slopes(self, x, y, out):  # x = trunc(x / y) * y + rem
        def y_slope():
            q = x / y
            return -(apply(Sign, q) * apply(Floor, abs(q)))

        return 1, y_slope
