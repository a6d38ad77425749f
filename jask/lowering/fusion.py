"""Elementwise fusion: the policy of the chain and shared-result passes.

Under jit, a chain of elementwise ops whose intermediates are used once becomes one engine
program: each input is read once and no intermediate is written. A value that is both a
result of the program and an input of later instructions (an optimizer's new state and the
update computed from it) is written by the pass that computes it, never read back. Fusion
runs after autodiff, so fused ops need no backward rule. Fusing any dtypes is exact: each
engine register holds its value in that value's dtype (int32 in int32, float16 rounded after
every instruction), as the stored intermediate would.

Which ops may merge is decided by their declared role (`Op.role`) and expression
(`Op.expression()`); graph.py does the program surgery.
"""

from __future__ import annotations

import jax
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, Role
from ..ops._elementwise import Expression, encode


class FusedMap(Op):
    """Several elementwise instructions in one pass, ending in a new DiskArray."""

    name = "fused"
    kernel = "map"
    role = Role.ELEMENTWISE
    scalars = "exact"

    def out_type(self, *operands, expr, label, shape, out_dtype, reduction="none"):
        return DiskArrayTy(shape, out_dtype)

    def expression(self) -> Expression:
        return Expression(
            self.expr, self.reduction, np.dtype(self.out_dtype), self.label, self.shape
        )

    def kernel_params(self):
        return {
            "label": self.label,
            **encode(self.expr, self.in_avals, self.shape, self.out_dtype, self.reduction),
        }


class FusedReduce(FusedMap):
    """Several elementwise instructions in one pass, ending in a full reduction."""

    kernel = "map_reduce"
    result = "scalar"
    role = Role.REDUCTION

    def out_type(self, *operands, expr, label, shape, out_dtype, reduction):
        return compat.ShapedArray((), jax.dtypes.canonicalize_dtype(out_dtype))


# The roles whose expression may be spliced into another's pass.
_FUSIBLE = (Role.ELEMENTWISE, Role.BROADCAST, Role.REDUCTION)


def _expression(op) -> Expression | None:
    """The expression of a fusible op, or None."""
    return op.expression() if op.role in _FUSIBLE else None


# Array operands of one fused pass: each needs a block buffer at the same
# time, so a longer chain would raise the smallest budget that works.
MAX_FUSED_ARRAYS = 4


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

    shifted = tuple(
        (instr, tuple(("in", i + k) if kind == "in" else (kind, i) for kind, i in args))
        for instr, args in p_expr
    )
    return avals, shifted + tuple((instr, tuple(moved(r) for r in args)) for instr, args in c_expr)


def fuse(consumer, k: int, producer):
    """The op computing `consumer` with its operand k replaced by `producer`'s computation,
    or None if the two cannot share one pass."""
    c, p = _expression(consumer), _expression(producer)
    if c is None or p is None or p.reduction != "none":
        return None
    avals, expr = _splice(
        consumer, (k,), producer, c.instructions, p.instructions, len(p.instructions) - 1
    )
    if sum(1 for a in avals if a.shape or isinstance(a, DiskArrayTy)) > MAX_FUSED_ARRAYS:
        return None
    cls = FusedMap if c.reduction == "none" else FusedReduce
    return cls(
        *avals,
        expr=expr,
        label=f"{p.label}+{c.label}",
        shape=c.shape,
        out_dtype=c.dtype,
        reduction=c.reduction,
    )


class FusedMulti(Op):
    """Several elementwise instructions in one pass writing several new DiskArrays: values
    that are both results of the program and inputs of later instructions (an optimizer's
    new state and the update computed from it) are written once, never read back."""

    name = "fused"
    kernel = "map_multi"
    result = "arrays"
    role = Role.ELEMENTWISE_MULTI
    scalars = "exact"

    def out_type(self, *operands, expr, label, shape, out_dtype, outputs):
        return tuple(DiskArrayTy(shape, out_dtype) for _ in outputs)

    def expression(self) -> Expression:
        return Expression(
            self.expr, "none", np.dtype(self.out_dtype), self.label, self.shape, self.outputs
        )

    def kernel_params(self):
        return {
            "label": self.label,
            **encode(self.expr, self.in_avals, self.shape, self.out_dtype, outputs=self.outputs),
        }


# Array streams (operands and results) of one multi-output pass.
MAX_FUSED_STREAMS = 8


def _results(op) -> Expression | None:
    """The expression of a pass writing arrays (one or several), or None."""
    if op.role is Role.ELEMENTWISE_MULTI:
        return op.expression()
    expression = _expression(op)
    if expression is None or expression.reduction != "none":
        return None
    return expression


def fuse_results(consumer, ks: tuple[int, ...], producer, consumed: int, kept: tuple[int, ...]):
    """One pass computing `producer` and `consumer`, where the consumer's operands at
    positions `ks` are the producer's result number `consumed`; the producer's operands take
    the place of the first of them. Its results are the producer's results listed in `kept`,
    then the consumer's. None if they cannot share a pass."""
    c, p = _results(consumer), _results(producer)
    if c is None or p is None or c.shape != p.shape or c.dtype != p.dtype:
        return None
    p_outs, c_outs = p.stored(), c.stored()
    avals, expr = _splice(consumer, ks, producer, c.instructions, p.instructions, p_outs[consumed])
    arrays = sum(1 for a in avals if a.shape or isinstance(a, DiskArrayTy))
    if arrays + len(kept) + len(c_outs) > MAX_FUSED_STREAMS:
        return None
    offset = len(p.instructions)
    outputs = tuple(p_outs[j] for j in kept) + tuple(j + offset for j in c_outs)
    return FusedMulti(
        *avals,
        expr=expr,
        label=f"{p.label}+{c.label}",
        shape=c.shape,
        out_dtype=c.dtype,
        outputs=outputs,
    )


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
    avals = prim.in_avals[:drop] + prim.in_avals[drop + 1 :]
    if prim.role is Role.ELEMENTWISE_MULTI:
        return FusedMulti(
            *avals,
            expr=expr,
            label=prim.label,
            shape=prim.shape,
            out_dtype=prim.out_dtype,
            outputs=prim.outputs,
        )
    return type(prim)(
        *avals,
        expr=expr,
        label=prim.label,
        shape=prim.shape,
        out_dtype=prim.out_dtype,
        reduction=prim.reduction,
    )


class ElementwiseFusion:
    """The policy of the chain pass (graph.ChainPolicy) and of the shared-result pass
    (graph.SharedResultPolicy)."""

    fuse = staticmethod(fuse)
    fuse_results = staticmethod(fuse_results)
    merge_operands = staticmethod(merge_operands)
