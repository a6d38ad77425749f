"""The elementwise family: ops computed by one engine instruction over DiskArrays of one
shape and scalars, streamed in one pass (see src/engine/program/program.hpp)."""

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


# An expression is a tuple of instructions (opcode name, argument refs); a ref
# is ("in", operand index) or ("tmp", index of an earlier instruction). The
# last instruction is the result.


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
    return {"shape": tuple(out_shape),
            "memory_dtypes": tuple(dtype_code(a.dtype) for a in memory),
            "memory_ranks": tuple(len(a.shape) for a in memory),
            "memory_dims": tuple(d for a in memory for d in a.shape),
            "n_regs": base + len(expr), "out_dtype": dtype_code(out_dtype),
            "reduction": REDUCTIONS[reduction], "out_regs": tuple(base + j for j in outputs),
            **{name: tuple(values) for name, values in fields.items()}}


def broadcast_shape(name: str, arrays) -> tuple[int, ...]:
    """NumPy's broadcast of the arrays' (or shapes') shapes; ValueError naming them all."""
    shapes = [tuple(a) if isinstance(a, tuple) else a.shape for a in arrays]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        names = [str(a) if isinstance(a, tuple) else describe(a) for a in arrays]
        raise ValueError(f"jask.{name}: shapes do not broadcast: {' and '.join(names)}") from None


def operand_shape(name: str, operands, allow_dense: bool = False) -> tuple[tuple[int, ...], list]:
    """The broadcast shape of the operands (NumPy rules) and the array operands among them;
    at least one must be a DiskArray."""
    if not allow_dense and not any(isinstance(a, DiskArrayTy) for a in operands):
        raise TypeError(f"jask.{name}: needs at least one DiskArray operand")
    arrays = [a for a in operands if isinstance(a, DiskArrayTy) or a.shape]
    return broadcast_shape(name, arrays), arrays


def common_dtype(name: str, disks) -> np.dtype:
    """The one dtype of the DiskArray operands; booleans promote to it, as in jnp."""
    numeric = [a for a in disks if a.dtype != np.bool_]
    disks = numeric or disks
    for a in disks[1:]:
        if a.dtype != disks[0].dtype:
            raise TypeError(f"jask.{name}: dtypes differ: {describe(disks[0])} and {describe(a)}; "
                            f"convert one of them with .astype first")
    return disks[0].dtype


def scalar_like(s, x):
    """`s` as a 0-d array of x's dtype (as JAX can hold it: float64 needs x64)."""
    return jnp.asarray(s, dtype=jax.dtypes.canonicalize_dtype(x.dtype))


def reduce_to(g, operand):
    """`g` (of the broadcast output's shape) as the cotangent of `operand`, a value or its
    type: summed over the axes along which the operand was broadcast."""
    on_disk = isinstance(operand, (DiskArray, DiskArrayTy))
    if g is None or (on_disk and tuple(operand.shape) == tuple(g.shape)):
        return g
    if tuple(operand.shape) == tuple(g.shape):  # an in-memory operand of the full shape
        from .to_dense import ToDense
        return apply(ToDense, g).astype(jax.dtypes.canonicalize_dtype(operand.dtype))
    if not operand.shape and not on_disk:
        dtype = jax.dtypes.canonicalize_dtype(operand.dtype)
        return apply(Reduce, g, instr="copy", reduction="sum").astype(dtype)
    from .reduce_axes import ReduceAxes, ReduceAxesDense
    from .reshape import Reshape
    lead = len(g.shape) - len(operand.shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(operand.shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    summed = apply(ReduceAxes if on_disk else ReduceAxesDense, g, axes=axes, reduction="sum")
    if on_disk:
        return apply(Reshape, summed, shape=tuple(operand.shape))
    return summed.reshape(operand.shape).astype(jax.dtypes.canonicalize_dtype(operand.dtype))


class Elementwise(Op):
    """Base of ops that are one engine instruction; subclasses set `instr` and `vjp`."""

    kernel = "map"
    instr: ClassVar[str]
    bool_result: ClassVar[bool] = False

    def out_type(self, *operands):
        shape, disks = operand_shape(self.name, operands)
        dtype = np.dtype(np.bool_) if self.bool_result else common_dtype(self.name, disks)
        return DiskArrayTy(shape, dtype)

    def expr(self) -> tuple:
        return single_instruction(self.instr, len(self.in_avals))

    def kernel_params(self):
        return {"label": self.name,
                **encode(self.expr(), self.in_avals, self.out_aval.shape, self.out_aval.dtype)}


class BroadcastTo(Elementwise):
    """An array, in memory or on disk (or a scalar), broadcast to a larger shape as a new
    DiskArray."""

    name = "broadcast_to"
    instr = "copy"

    def out_type(self, x, *, shape):
        if broadcast_shape(self.name, [x, tuple(shape)]) != tuple(shape):
            raise ValueError(f"jask.broadcast_to: cannot broadcast {describe(x)} to {shape}")
        return DiskArrayTy(tuple(shape), x.dtype)

    def vjp(self, ct, x, *, out, needs):
        return (reduce_to(ct, x),)

    def tangent(self, out, operands, tangents):
        return apply(BroadcastTo, tangents[0], shape=self.shape)


class Reduce(Op):
    """The sum, max or min over all elements of one elementwise instruction's result."""

    name = "reduce"
    kernel = "map_reduce"
    result = "scalar"

    def out_type(self, *operands, instr, reduction):
        _, arrays = operand_shape(self.name, operands)
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(common_dtype(self.name, arrays)))

    def expr(self) -> tuple:
        return single_instruction(self.instr, len(self.in_avals))

    def kernel_params(self):
        shape, arrays = operand_shape(self.name, self.in_avals)
        return {"label": self.reduction,
                **encode(self.expr(), self.in_avals, shape, arrays[0].dtype, self.reduction)}

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
        if self.instr == "copy":  # max or min: ct split evenly among the elements that attain it
            (x,) = operands
            return (_chosen(x, out) * scalar_like(ct, x),)
        raise NotImplementedError(f"jax.grad of jask.{self.reduction} of {self.instr} needs a backward rule")

    def tangent(self, out, operands, tangents):
        if self.reduction == "sum" and self.instr == "copy":
            return apply(Reduce, tangents[0], instr="copy", reduction="sum")
        if self.reduction == "sum" and self.instr == "mul":
            (a, b), (ta, tb) = operands, tangents
            vdot = lambda u, v: apply(Reduce, u, v, instr="mul", reduction="sum")  # noqa: E731
            terms = [None if ta is None else vdot(ta, b), None if tb is None else vdot(a, tb)]
            return terms[0] if terms[1] is None else terms[1] if terms[0] is None else terms[0] + terms[1]
        if self.instr == "copy":  # max or min
            x, tx = operands[0], tangents[0]
            return apply(Reduce, tx * _chosen(x, out), instr="copy", reduction="sum")
        raise NotImplementedError(f"jax.jvp of jask.{self.reduction} of {self.instr} needs a forward rule")


def _chosen(x, out):
    """Weights 1/k on the k elements of x equal to its max (or min) `out`, 0 elsewhere."""
    hits = (x == scalar_like(out, x)).astype(x.dtype)
    return hits / apply(Reduce, hits, instr="copy", reduction="sum").astype(hits.dtype)


# -- fusion -------------------------------------------------------------------
#
# Under jit, a chain of elementwise ops whose intermediates are used once
# becomes one engine program (compat.install_lowering_passes finds the
# chains): each input is read once and no intermediate is written. Fusion
# runs after autodiff, so fused ops need no backward rule.


class FusedMap(Op):
    """Several elementwise instructions in one pass, ending in a new DiskArray."""

    name = "fused"
    kernel = "map"

    def out_type(self, *operands, expr, label, shape, out_dtype, reduction="none"):
        return DiskArrayTy(shape, out_dtype)

    def kernel_params(self):
        return {"label": self.label,
                **encode(self.expr, self.in_avals, self.shape, self.out_dtype, self.reduction)}


class FusedReduce(FusedMap):
    """Several elementwise instructions in one pass, ending in a full reduction."""

    kernel = "map_reduce"
    result = "scalar"

    def out_type(self, *operands, expr, label, shape, out_dtype, reduction):
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(out_dtype))


def _parts(prim):
    """(expr, reduction, out dtype, label, iteration shape) of a fusible op, or None."""
    if isinstance(prim, FusedMap):
        return prim.expr, prim.reduction, np.dtype(prim.out_dtype), prim.label, prim.shape
    if isinstance(prim, Elementwise):
        return prim.expr(), "none", prim.out_aval.dtype, prim.name, prim.out_aval.shape
    if prim.kernel == "fill":  # a scalar broadcast (the cotangent of a sum): no array to write
        return single_instruction("copy", 1), "none", prim.out_aval.dtype, "fill", prim.out_aval.shape
    if isinstance(prim, Reduce):
        label = prim.reduction if prim.instr == "copy" else f"{prim.instr}+{prim.reduction}"
        shape, arrays = operand_shape(prim.name, prim.in_avals)
        return prim.expr(), prim.reduction, common_dtype(prim.name, arrays), label, shape
    return None


_EXACT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Array operands of one fused pass: each needs a block buffer at the same
# time, so a longer chain would raise the smallest budget that works.
MAX_FUSED_ARRAYS = 4


def _same_float_dtype(avals) -> bool:
    """Fusing keeps intermediates in registers; that equals the unfused result only when
    every stored value has the compute precision (one float dtype; bools are exact)."""
    dtypes = {a.dtype for a in avals if isinstance(a, DiskArrayTy) and a.dtype != np.bool_}
    return len(dtypes) == 1 and dtypes.pop() in _EXACT_DTYPES


def _splice(consumer, ks, producer, c_expr, p_expr, result):
    """(operand avals, instructions) of the producer's instructions followed by the
    consumer's, whose operands at positions `ks` become the producer's instruction `result`;
    the producer's operands take the place of the first of them."""
    k = ks[0]
    rest = [i for i in range(k + 1, len(consumer.in_avals)) if i not in ks]
    avals = (*consumer.in_avals[:k], *producer.in_avals, *(consumer.in_avals[i] for i in rest))
    width, offset = len(producer.in_avals), len(p_expr)

    def moved(ref):
        kind, i = ref
        if kind == "tmp":
            return ("tmp", i + offset)
        if i in ks:
            return ("tmp", result)
        return ("in", i if i < k else k + width + rest.index(i))
    shifted = tuple((instr, tuple(("in", i + k) if kind == "in" else (kind, i) for kind, i in args))
                    for instr, args in p_expr)
    return avals, shifted + tuple((instr, tuple(moved(r) for r in args)) for instr, args in c_expr)


def fuse(consumer, k: int, producer):
    """The op computing `consumer` with its operand k replaced by `producer`'s computation,
    or None if the two cannot share one pass."""
    c, p = _parts(consumer), _parts(producer)
    if c is None or p is None or p[1] != "none":
        return None
    (c_expr, reduction, out_dtype, c_label, shape), (p_expr, _, _, p_label, _) = c, p
    avals, expr = _splice(consumer, (k,), producer, c_expr, p_expr, len(p_expr) - 1)
    if sum(1 for a in avals if a.shape or isinstance(a, DiskArrayTy)) > MAX_FUSED_ARRAYS:
        return None
    if not _same_float_dtype((*avals, producer.out_aval, DiskArrayTy((), c[2]))):
        return None
    cls = FusedMap if reduction == "none" else FusedReduce
    return cls(*avals, expr=expr, label=f"{p_label}+{c_label}", shape=shape,
               out_dtype=out_dtype, reduction=reduction)


class FusedMulti(Op):
    """Several elementwise instructions in one pass writing several new DiskArrays: values
    that are both results of the program and inputs of later instructions (an optimizer's
    new state and the update computed from it) are written once, never read back."""

    name = "fused"
    kernel = "map_multi"
    result = "arrays"

    def out_type(self, *operands, expr, label, shape, out_dtype, outputs):
        return tuple(DiskArrayTy(shape, out_dtype) for _ in outputs)

    def kernel_params(self):
        return {"label": self.label,
                **encode(self.expr, self.in_avals, self.shape, self.out_dtype, outputs=self.outputs)}


# Array streams (operands and results) of one multi-output pass.
MAX_FUSED_STREAMS = 8


def _results(prim):
    """(expr, result instructions, out dtype, label, shape) of a pass writing arrays, or None."""
    if isinstance(prim, FusedMulti):
        return prim.expr, prim.outputs, np.dtype(prim.out_dtype), prim.label, prim.shape
    parts = _parts(prim)
    if parts is None or parts[1] != "none":
        return None
    expr, _, out_dtype, label, shape = parts
    return expr, (len(expr) - 1,), out_dtype, label, shape


def fuse_results(consumer, ks: tuple[int, ...], producer, consumed: int, kept: tuple[int, ...]):
    """One pass computing `producer` and `consumer`, where the consumer's operands at
    positions `ks` are the producer's result number `consumed`; the producer's operands take
    the place of the first of them. Its results are the producer's results listed in `kept`,
    then the consumer's. None if they cannot share a pass."""
    c, p = _results(consumer), _results(producer)
    if c is None or p is None or c[4] != p[4] or c[2] != p[2]:
        return None
    (c_expr, c_outs, out_dtype, c_label, shape), (p_expr, p_outs, _, p_label, _) = c, p
    avals, expr = _splice(consumer, ks, producer, c_expr, p_expr, p_outs[consumed])
    arrays = sum(1 for a in avals if a.shape or isinstance(a, DiskArrayTy))
    if arrays + len(kept) + len(c[1]) > MAX_FUSED_STREAMS:
        return None
    if not _same_float_dtype((*avals, DiskArrayTy((), c[2]))):
        return None
    offset = len(p_expr)
    outputs = tuple(p_outs[j] for j in kept) + tuple(j + offset for j in c_outs)
    return FusedMulti(*avals, expr=expr, label=f"{p_label}+{c_label}", shape=shape,
                      out_dtype=out_dtype, outputs=outputs)


def merge_operands(prim, keep: int, drop: int):
    """`prim` with operand `drop` read from operand `keep` instead (the same value twice)."""
    def ref(r):
        kind, i = r
        if kind != "in":
            return r
        if i == drop:
            return ("in", keep)
        return ("in", i - 1 if i > drop else i)
    expr = tuple((instr, tuple(ref(r) for r in args)) for instr, args in prim.expr)
    avals = prim.in_avals[:drop] + prim.in_avals[drop + 1:]
    if isinstance(prim, FusedMulti):
        return FusedMulti(*avals, expr=expr, label=prim.label, shape=prim.shape,
                          out_dtype=prim.out_dtype, outputs=prim.outputs)
    return type(prim)(*avals, expr=expr, label=prim.label, shape=prim.shape,
                      out_dtype=prim.out_dtype, reduction=prim.reduction)
