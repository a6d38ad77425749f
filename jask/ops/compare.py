"""Elementwise comparisons, giving boolean DiskArrays; their derivative is zero."""
from ._elementwise import Elementwise


class Compare(Elementwise):
    bool_result = True
    zero_derivative = True


class Less(Compare):
    name, instr = "less", "lt"


class LessEqual(Compare):
    name, instr = "less_equal", "le"


class Greater(Compare):
    name, instr = "greater", "gt"


class GreaterEqual(Compare):
    name, instr = "greater_equal", "ge"


class Equal(Compare):
    name, instr = "equal", "eq"


class NotEqual(Compare):
    name, instr = "not_equal", "ne"
