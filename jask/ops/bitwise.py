"""Bitwise operations on int32 (logical ones on bool: and, or, xor, not) and shifts, as XLA
computes them: a shift by 32 or more (or by a negative amount) gives 0, or the sign bit
everywhere for the arithmetic right shift. Their derivatives are zero."""

from ._pointwise import Binary, Pointwise


class And(Binary):
    name, instr = "bitwise_and", "and"
    accepts = "integer"
    primitives = ("and",)
    zero_derivative = True


class Or(Binary):
    name, instr = "bitwise_or", "or"
    accepts = "integer"
    primitives = ("or",)
    zero_derivative = True


class Xor(Binary):
    name, instr = "bitwise_xor", "xor"
    accepts = "integer"
    primitives = ("xor",)
    zero_derivative = True


class Not(Pointwise):
    """~x on int32, logical not on bool, elementwise."""

    name, instr = "bitwise_not", "not"
    accepts = "integer"
    primitives = ("not",)
    zero_derivative = True


class ShiftLeft(Binary):
    name = instr = "shift_left"
    accepts = "int"
    primitives = ("shift_left",)
    zero_derivative = True


class ShiftRightLogical(Binary):
    name = instr = "shift_right_logical"
    accepts = "int"
    primitives = ("shift_right_logical",)
    zero_derivative = True


class ShiftRightArithmetic(Binary):
    name = instr = "shift_right_arithmetic"
    accepts = "int"
    primitives = ("shift_right_arithmetic",)
    zero_derivative = True
