"""Elementwise comparisons, giving boolean DiskArrays; their derivative is zero."""

from ._pointwise import Binary


class Compare(Binary):
    bool_result = True
    accepts = "any"
    zero_derivative = True


class Less(Compare):
    name, instr = "less", "lt"
    primitives = ("lt",)


class LessEqual(Compare):
    name, instr = "less_equal", "le"
    primitives = ("le",)


class Greater(Compare):
    name, instr = "greater", "gt"
    primitives = ("gt",)


class GreaterEqual(Compare):
    name, instr = "greater_equal", "ge"
    primitives = ("ge",)


class Equal(Compare):
    name, instr = "equal", "eq"
    primitives = ("eq",)


class NotEqual(Compare):
    name, instr = "not_equal", "ne"
    primitives = ("ne",)
