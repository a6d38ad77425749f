"""x ** y for a Python int y (jax.lax.integer_pow), elementwise: repeated squaring in one
pass, multiplied in the order XLA's expansion of the primitive multiplies."""

import jax.numpy as jnp

from .._jax.op import apply
from ._elementwise import single_instruction
from ._pointwise import Pointwise


class IntegerPow(Pointwise):
    name = "integer_pow"
    primitives = ("integer_pow",)

    def out_type(self, x, *, y):
        if int(y) < 0 and not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"jask.integer_pow: a negative power {y} of {x.dtype.name} values")
        return super().out_type(x)

    @classmethod
    def from_primitive(cls, x, *, y):
        return x if int(y) == 1 else apply(cls, x, y=int(y))

    def expr(self) -> tuple:
        y = int(self.params["y"])
        if y == 0:  # 1 everywhere, NaN included: (x == x) | (x != x)
            return (
                ("eq", (("in", 0), ("in", 0))),
                ("ne", (("in", 0), ("in", 0))),
                ("or", (("tmp", 0), ("tmp", 1))),
                (f"convert_{self.out_aval.dtype.name}", (("tmp", 2),)),
            )
        instructions, acc, base, n = [], None, ("in", 0), abs(y)
        while n:
            if n & 1:
                if acc is None:
                    acc = base
                else:
                    instructions.append(("mul", (acc, base)))
                    acc = ("tmp", len(instructions) - 1)
            n >>= 1
            if n:
                instructions.append(("mul", (base, base)))
                base = ("tmp", len(instructions) - 1)
        if y < 0:
            instructions.append(("reciprocal", (acc,)))
        elif acc == ("in", 0):
            return single_instruction("copy", 1)
        # the squares after the last factor are never used: drop them from the end
        while instructions and ("tmp", len(instructions) - 1) != acc and y > 0:
            instructions.pop()
        return tuple(instructions)

    def slope(self, x, out):
        y = int(self.params["y"])
        if y == 0:
            return None
        return apply(IntegerPow, x, y=y - 1) * y
