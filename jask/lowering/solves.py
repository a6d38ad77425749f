"""The passes that give a staged custom_linear_solve of DiskArrays, or a library's own primitive
on DiskArrays (lineax's linear_solve_p), its value: the equations of its solve function
(compat.inline_linear_solves) or of its implementation (compat.inline_library_primitives),
with operands and results converted between memory and DiskArrays where the inlined types and
the program's differ."""

from __future__ import annotations

from .._jax import compat
from ..ops.in_memory import FromInMemory, ToInMemory


def _convert_equation(var, to_disk: bool, like):
    op = (FromInMemory if to_disk else ToInMemory)(var.aval)
    out = compat.new_var(op.out_aval)
    return compat.hi_equation([var], [out], op, like, effects=frozenset()), out


def inline_linear_solves(closed_jaxpr):
    return compat.inline_linear_solves(closed_jaxpr, _convert_equation)


def inline_library_primitives(closed_jaxpr):
    return compat.inline_library_primitives(closed_jaxpr, _convert_equation)
