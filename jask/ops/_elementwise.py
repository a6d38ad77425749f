"""The elementwise family: ops computed by one engine instruction over DiskArrays of one
shape and scalars, streamed in one pass (see src/engine/program/program.hpp)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import _engine
from .._dtypes import dtype_code
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, Role, describe

OPCODES: dict[str, int] = dict(_engine.opcodes())
REDUCTIONS: dict[str, int] = dict(_engine.reductions())


# An expression is a tuple of instructions (opcode name, argument refs); a ref
# is ("in", operand index) or ("tmp", index of an earlier instruction). The
# last instruction is the result.


@dataclass(frozen=True)
class Expression:
    """An op's engine expression, as the fusion passes see it (`Op.expression()`)."""

    instructions: tuple
    """(opcode name, argument refs) per instruction; the last is the result."""
    reduction: str
    """"none", or the full reduction ("sum", "max", "min", "prod") of the result."""
    dtype: np.dtype
    """The dtype the result is computed (and stored) in."""
    label: str
    """The name in kernel names and messages ("exp+mul")."""
    shape: tuple[int, ...]
    """The iteration shape: the broadcast shape of the array operands."""
    outputs: tuple[int, ...] = ()
    """The instructions whose results are stored (empty: the last one)."""

    def stored(self) -> tuple[int, ...]:
        return self.outputs or (len(self.instructions) - 1,)


def single_instruction(instr: str, n_operands: int) -> tuple:
    return ((instr, tuple(("in", i) for i in range(n_operands))),)


def _kind(aval) -> str:
    if isinstance(aval, DiskArrayTy):
        return "disk"
    return "memory" if aval.shape else "scalar"


def encode(expr, in_avals, out_shape, out_dtype, reduction: str = "none", outputs=None) -> dict:
    """The fields of the engine's elementwise kernels for `expr` (ElementwiseParams in
    src/engine/kernels/ops.cpp): the output shape, each in-memory operand's dtype and shape,
    and the program. DiskArray operands are the first registers, in-memory arrays the next,
    scalars after them, then one register per instruction. `outputs` lists the instructions
    whose results are stored (default: the last one)."""
    kinds = [_kind(a) for a in in_avals]
    order = [i for k in ("disk", "memory", "scalar") for i, kind in enumerate(kinds) if kind == k]
    register = {operand: r for r, operand in enumerate(order)}
    memory = [in_avals[i] for i in order if kinds[i] == "memory"]
    base = len(in_avals)
    outputs = (len(expr) - 1,) if outputs is None else tuple(outputs)
    fields = {"op": [], "dst": [], "a": [], "b": [], "c": []}
    for j, (instr, args) in enumerate(expr):
        regs = [register[i] if kind == "in" else base + i for kind, i in args]
        for name, value in zip(fields, (OPCODES[instr], base + j, *(regs + [0, 0, 0])[:3])):
            fields[name].append(value)
    return {
        "shape": tuple(out_shape),
        "memory_dtypes": tuple(dtype_code(a.dtype) for a in memory),
        "memory_ranks": tuple(len(a.shape) for a in memory),
        "memory_dims": tuple(d for a in memory for d in a.shape),
        "n_regs": base + len(expr),
        "out_dtype": dtype_code(out_dtype),
        "reduction": REDUCTIONS[reduction],
        "out_regs": tuple(base + j for j in outputs),
        **{name: tuple(values) for name, values in fields.items()},
    }


def broadcast_shape(name: str, arrays) -> tuple[int, ...]:
    """NumPy's broadcast of the arrays' (or shapes') shapes; ValueError naming them all."""
    shapes = [tuple(a) if isinstance(a, tuple) else a.shape for a in arrays]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        names = [str(a) if isinstance(a, tuple) else describe(a) for a in arrays]
        raise ValueError(f"jask.{name}: shapes do not broadcast: {' and '.join(names)}") from None


def operand_shape(
    name: str, operands, allow_in_memory: bool = False
) -> tuple[tuple[int, ...], list]:
    """The broadcast shape of the operands (NumPy rules) and the array operands among them;
    at least one must be a DiskArray."""
    if not allow_in_memory and not any(isinstance(a, DiskArrayTy) for a in operands):
        raise TypeError(f"jask.{name}: needs at least one DiskArray operand")
    arrays = [a for a in operands if isinstance(a, DiskArrayTy) or a.shape]
    return broadcast_shape(name, arrays), arrays


def common_dtype(name: str, disks) -> np.dtype:
    """The one dtype of the DiskArray operands; booleans promote to it, as in jnp."""
    numeric = [a for a in disks if a.dtype != np.bool_]
    disks = numeric or disks
    for a in disks[1:]:
        if a.dtype != disks[0].dtype:
            raise TypeError(
                f"jask.{name}: dtypes differ: {describe(disks[0])} and {describe(a)}; "
                f"convert one of them with .astype first"
            )
    return disks[0].dtype


def scalar_like(s, x):
    """`s` as a 0-d array of x's dtype (as JAX can hold it: float64 needs x64)."""
    return jnp.asarray(s, dtype=jax.dtypes.canonicalize_dtype(x.dtype))


class Elementwise(Op):
    """Base of ops that are one engine instruction; subclasses set `instr` and declare their
    derivative (ops declared by slopes subclass `_pointwise.Unary` or `_pointwise.Binary`)."""

    kernel = "map"
    role = Role.ELEMENTWISE
    instr: ClassVar[str]
    bool_result: ClassVar[bool] = False

    def out_type(self, *operands):
        shape, disks = operand_shape(self.name, operands)
        dtype = np.dtype(np.bool_) if self.bool_result else common_dtype(self.name, disks)
        return DiskArrayTy(shape, dtype)

    def expr(self) -> tuple:
        return single_instruction(self.instr, len(self.in_avals))

    def expression(self) -> Expression:
        return Expression(self.expr(), "none", self.out_aval.dtype, self.name, self.out_aval.shape)

    def kernel_params(self):
        return {
            "label": self.name,
            **encode(self.expr(), self.in_avals, self.out_aval.shape, self.out_aval.dtype),
        }

    def zero_tangent(self, aval):
        return jnp.zeros((), jax.dtypes.canonicalize_dtype(aval.dtype))  # it broadcasts
