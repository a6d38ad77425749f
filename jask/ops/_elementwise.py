"""The elementwise family: ops computed by one engine instruction over DiskArrays of one
shape and scalars, streamed in one pass (see src/engine/program.hpp)."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import _engine
from .._dtypes import dtype_code
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe

OPCODES: dict[str, int] = dict(_engine.opcodes())
REDUCTIONS = {"none": 0, "sum": 1, "max": 2, "min": 3}


def program(instr: str, operands, out_dtype, reduction: str = "none") -> tuple[int, ...]:
    """Engine program applying `instr` to the operands (DiskArrays become registers in order,
    then scalars), into one result register."""
    disks = [a for a in operands if isinstance(a, DiskArrayTy)]
    n_disk, n_scalar = len(disks), len(operands) - len(disks)
    regs, d, s = [], 0, n_disk
    for a in operands:
        if isinstance(a, DiskArrayTy):
            regs.append(d)
            d += 1
        else:
            regs.append(s)
            s += 1
    dst = n_disk + n_scalar
    a, b, c = (regs + [0, 0, 0])[:3]
    return (dst + 1, dtype_code(out_dtype), REDUCTIONS[reduction], dst, 1,
            OPCODES[instr], dst, a, b, c)


def operand_shape(name: str, operands) -> tuple[tuple[int, ...], list[DiskArrayTy]]:
    """The common shape of the DiskArray operands; the others must be scalars."""
    disks = [a for a in operands if isinstance(a, DiskArrayTy)]
    if not disks:
        raise TypeError(f"jask.{name}: needs at least one DiskArray operand")
    for a in operands:
        if not isinstance(a, DiskArrayTy) and getattr(a, "shape", None) != ():
            raise TypeError(f"jask.{name}: operand {describe(a)} is neither a DiskArray nor a "
                            f"scalar; Jask does not broadcast dense arrays yet")
        if isinstance(a, DiskArrayTy) and a.shape != disks[0].shape:
            raise ValueError(f"jask.{name}: shapes differ: {describe(disks[0])} and {describe(a)}; "
                             f"elementwise ops need equal shapes")
    return disks[0].shape, disks


def common_dtype(name: str, disks) -> np.dtype:
    for a in disks[1:]:
        if a.dtype != disks[0].dtype:
            raise TypeError(f"jask.{name}: dtypes differ: {describe(disks[0])} and {describe(a)}; "
                            f"convert one of them with .astype first")
    return disks[0].dtype


def scalar_like(s, x):
    """`s` as a 0-d array of x's dtype (as JAX can hold it: float64 needs x64)."""
    return jnp.asarray(s, dtype=jax.dtypes.canonicalize_dtype(x.dtype))


def reduce_to(g, operand):
    """`g` as the cotangent of `operand`: a scalar operand receives the sum over all elements."""
    if g is None or isinstance(operand, DiskArray):
        return g
    return apply(Reduce, g, instr="copy", reduction="sum").astype(compat.typeof(operand).dtype)


class Elementwise(Op):
    """Base of ops that are one engine instruction; subclasses set `instr` and `vjp`."""

    kernel = "map"
    instr: ClassVar[str]
    bool_result: ClassVar[bool] = False

    def out_type(self, *operands):
        shape, disks = operand_shape(self.name, operands)
        dtype = np.dtype(np.bool_) if self.bool_result else common_dtype(self.name, disks)
        return DiskArrayTy(shape, dtype)

    def kernel_params(self):
        return program(self.instr, self.in_avals, self.out_aval.dtype)

    def kernel_name(self):
        return f"map/{self.name}"


class Reduce(Op):
    """The sum, max or min over all elements of one elementwise instruction's result."""

    name = "reduce"
    kernel = "map_reduce"
    result = "scalar"

    def out_type(self, *operands, instr, reduction):
        _, disks = operand_shape(self.name, operands)
        common_dtype(self.name, disks)
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(disks[0].dtype))

    def kernel_params(self):
        return program(self.instr, self.in_avals, self.in_avals[0].dtype, self.reduction)

    def kernel_name(self):
        return f"map_reduce/{self.reduction}"

    def vjp(self, ct, *operands, out, needs):
        from .fill import Fill
        from .mul import Mul
        if self.reduction == "sum" and self.instr == "copy":
            (x,) = operands
            return (apply(Fill, ct, shape=x.shape, dtype=x.dtype),)
        if self.reduction == "sum" and self.instr == "mul":
            a, b = operands
            return (apply(Mul, b, scalar_like(ct, b)) if needs[0] else None,
                    apply(Mul, a, scalar_like(ct, a)) if needs[1] else None)
        raise NotImplementedError(f"jax.grad of a {self.reduction} of {self.instr} needs a backward rule")
