"""Elementwise comparisons, giving boolean DiskArrays; their derivative is zero."""

from ._pointwise import Binary


class Compare(Binary):
    bool_result = True
    accepts = "any"
    zero_derivative = True


class Less(Compare):
    name, instr = "less", "lt"
    numpy_names = ("jnp.less",)
    primitives = ("lt",)


class LessEqual(Compare):
    name, instr = "less_equal", "le"
    numpy_names = ("jnp.less_equal",)
    primitives = ("le",)


class Greater(Compare):
    name, instr = "greater", "gt"
    numpy_names = ("jnp.greater",)
    primitives = ("gt",)


class GreaterEqual(Compare):
    name, instr = "greater_equal", "ge"
    numpy_names = ("jnp.greater_equal",)
    primitives = ("ge",)


class Equal(Compare):
    name, instr = "equal", "eq"
    numpy_names = ("jnp.equal",)
    primitives = ("eq",)


class NotEqual(Compare):
    name, instr = "not_equal", "ne"
    numpy_names = ("jnp.not_equal",)
    primitives = ("ne",)
