"""The elementwise family: ops computed by one engine instruction over DiskArrays of one
shape and scalars, streamed in one pass (see src/engine/program/program.hpp)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import _engine
from .._dtypes import COMPLEX, FLOATS, INTEGERS, SUPPORTED, dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, Role, describe, double_holds

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
    """How the engine takes an operand (Op.scalars "exact"): a 0-d one of a dtype a double does
    not hold (int64, uint64, complex) as a one-element in-memory array, other 0-d ones as
    scalars."""
    if isinstance(aval, DiskArrayTy):
        return "disk"
    return "scalar" if not aval.shape and double_holds(aval.dtype) else "memory"


def encode(expr, in_avals, out_shape, out_dtype, reduction: str = "none", outputs=None) -> dict:
    """The fields of the engine's elementwise kernels for `expr` (ElementwiseParams in
    src/engine/kernels/ops.cpp): the output shape, each in-memory operand's dtype and shape,
    each scalar's dtype, and the program. DiskArray operands are the first registers,
    in-memory arrays the next, scalars after them, then one register per instruction (the
    engine gives each the dtype its instruction yields). `outputs` lists the instructions
    whose results are stored (default: the last one)."""
    kinds = [_kind(a) for a in in_avals]
    order = [i for k in ("disk", "memory", "scalar") for i, kind in enumerate(kinds) if kind == k]
    register = {operand: r for r, operand in enumerate(order)}
    memory = [in_avals[i] for i in order if kinds[i] == "memory"]
    scalars = [in_avals[i] for i in order if kinds[i] == "scalar"]
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
        "scalar_dtypes": tuple(dtype_code(a.dtype) for a in scalars),
        "n_regs": base + len(expr),
        "out_dtype": dtype_code(out_dtype),
        "reduction": REDUCTIONS[reduction],
        "out_regs": tuple(base + j for j in outputs),
        **{name: tuple(values) for name, values in fields.items()},
    }


def broadcast_shape(name: str, arrays) -> tuple[int, ...]:
    """NumPy's broadcast of the arrays' (or shapes') shapes; a TypeError naming them all (as
    jax.lax's elementwise primitives raise for shapes that do not broadcast)."""
    shapes = [tuple(a) if isinstance(a, tuple) else a.shape for a in arrays]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        names = [str(a) if isinstance(a, tuple) else describe(a) for a in arrays]
        raise TypeError(f"jask.{name}: shapes do not broadcast: {' and '.join(names)}") from None


def operand_shape(
    name: str, operands, allow_in_memory: bool = False
) -> tuple[tuple[int, ...], list]:
    """The broadcast shape of the operands (NumPy rules) and the array operands among them;
    at least one must be a DiskArray."""
    if not allow_in_memory and not any(isinstance(a, DiskArrayTy) for a in operands):
        raise TypeError(f"jask.{name}: needs at least one DiskArray operand")
    arrays = [a for a in operands if isinstance(a, DiskArrayTy) or a.shape]
    return broadcast_shape(name, arrays), arrays


def common_dtype(name: str, operands) -> np.dtype:
    """The one dtype of an elementwise primitive's operands (jax.lax's rule: jax.numpy has
    promoted them before binding it); TypeError naming both where two differ. A 0-d
    in-memory operand of the dtype JAX holds in place of a DiskArray's (float32 for float64
    without jax_enable_x64) counts as that DiskArray's dtype."""
    disks = [a for a in operands if isinstance(a, DiskArrayTy)]
    first = (disks or list(operands))[0]
    for a in operands:
        if a.dtype != first.dtype and not _stands_for(a, first.dtype):
            raise TypeError(
                f"jask.{name}: operands of one dtype needed (jax.lax's rule), got "
                f"{describe(first)} and {describe(a)}; convert one of them with .astype first"
            )
    return np.dtype(first.dtype)


def _stands_for(aval, dtype) -> bool:
    """Whether `aval` is a scalar JAX gives in place of one of `dtype`."""
    return (
        not isinstance(aval, DiskArrayTy)
        and aval.shape == ()
        and np.dtype(aval.dtype) == np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    )


def exact_operands(in_avals, dtype) -> tuple:
    """`in_avals` with the scalars that stand for `dtype` (see common_dtype) given it, so the
    engine reads them as `dtype`."""
    return tuple(
        compat.ShapedArray((), dtype)
        if _stands_for(a, dtype) and np.dtype(a.dtype) != np.dtype(dtype)
        else a
        for a in in_avals
    )


# The dtypes an elementwise op accepts, by the name an op states (`Elementwise.accepts`).
ACCEPTS = {
    "float": FLOATS,
    "number": FLOATS + INTEGERS,
    "integer": INTEGERS + ("bool",),
    "int": INTEGERS,
    # complex values the engine stores and moves; XLA computes with them (xla_route)
    "any": tuple(name for name in SUPPORTED if name not in COMPLEX),
}


class EngineDtypeError(TypeError):
    """An operand dtype the engine's instruction does not take. A jax.lax primitive whose rule
    raises it is computed by XLA instead (jask/_api/xla_route.py), which gives JAX's own
    TypeError where JAX refuses the dtype too."""


def check_accepts(name: str, primitive: str, accepts: str, aval) -> None:
    """EngineDtypeError (a TypeError) for an operand dtype the engine's instruction does not
    take."""
    if np.dtype(aval.dtype).name not in ACCEPTS[accepts]:
        raise EngineDtypeError(
            f"jask.{name}: jax.lax.{primitive} does not accept {describe(aval)}; it takes "
            f"{', '.join(ACCEPTS[accepts])}"
        )


def scalar_like(s, x):
    """`s` as a 0-d array of x's dtype (as JAX can hold it: float64 needs x64)."""
    return jnp.asarray(s, dtype=jax.dtypes.canonicalize_dtype(x.dtype))


class Elementwise(Op):
    """Base of ops that are one engine instruction; subclasses set `instr` and declare their
    derivative (ops declared by slopes subclass `_pointwise.Unary` or `_pointwise.Binary`).
    Operands follow jax.lax's rules: one dtype (`accepts` names which), and NumPy
    broadcasting of size-1 and 0-d operands."""

    kernel = "map"
    role = Role.ELEMENTWISE
    scalars = "exact"
    instr: ClassVar[str]
    bool_result: ClassVar[bool] = False
    accepts: ClassVar[str] = "number"
    """The operand dtypes, a key of ACCEPTS."""
    same_dtype: ClassVar[tuple[int, ...] | None] = None
    """The operands that share one dtype (None: all; where's condition does not)."""

    def __init__(self, *in_avals, **params):
        shared = range(len(in_avals)) if self.same_dtype is None else self.same_dtype
        disks = [in_avals[i] for i in shared if isinstance(in_avals[i], DiskArrayTy)]
        if disks:
            exact = exact_operands([in_avals[i] for i in shared], disks[0].dtype)
            in_avals = list(in_avals)
            for i, aval in zip(shared, exact):
                in_avals[i] = aval
        super().__init__(*in_avals, **params)

    def out_type(self, *operands):
        shape, _ = operand_shape(self.name, operands)
        dtype = common_dtype(self.name, operands)
        check_accepts(self.name, self.lax_name(), self.accepts, DiskArrayTy(shape, dtype))
        return DiskArrayTy(shape, np.dtype(np.bool_) if self.bool_result else dtype)

    @classmethod
    def lax_name(cls) -> str:
        return cls.primitives[0] if cls.primitives else cls.name

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
