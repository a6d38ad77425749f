"""The sign of x (-1, 0 or 1), elementwise; its derivative is zero."""

from ._pointwise import Unary


class Sign(Unary):
    name = "sign"
    instr = "sign"
    primitives = ("sign",)
    zero_derivative = True
