"""The sign of x (-1, 0 or 1), elementwise; its derivative is zero."""
from ._elementwise import Elementwise


class Sign(Elementwise):
    name = "sign"
    instr = "sign"
    zero_derivative = True
