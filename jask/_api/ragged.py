"""jax.lax.ragged_dot_general (and so jax.lax.ragged_dot: a mixture of experts' products) with
DiskArray operands larger than the XLA route holds in memory.

In the common mode (`jax.lax.ragged_dot`: lhs [m, k] rows sorted by group, rhs [g, k, n] one
matrix per group, group_sizes [g]) row r of the result is lhs[r] @ rhs[i] for the group i with
start_i <= r < end_i (end = cumsum(group_sizes), start = end - group_sizes: JAX's own rule,
which gives zero rows past the groups' end and drops the rows of groups past m). Rows are
independent, so lhs streams in row blocks; a block [s, s + B) holds the groups' rows clipped to
it, clip(end_i - s, 0, B) - clip(start_i - s, 0, B) of group i (computed in the program, so
traced group sizes work under jit):

1. **It fits**: the DiskArray operands read whole and the result take at most the allowance
   (half the memory budget): the XLA route computes it in memory, as for any primitive.
2. **rhs fits** (a third of the allowance at most), with row blocks sized in half the
   allowance (XLA's ragged dot on CPU holds g copies of a block, and a gradient's program runs
   this loop beside its transposes') an eighth of the by-group route's at least:
   `RaggedDotRows`, a `BlockMap` over row blocks of lhs with rhs whole, XLA's ragged_dot per
   block.
3. **Only one group's matrix fits**: `RaggedDotByGroup`. Per row block, the groups it touches
   (start_i < s + B and end_i > s: a dynamic range under jit) are read one rhs[i] at a time and
   the block's rows of group i multiplied by it. An in-memory lhs whose result takes at most
   half the allowance (a few tokens through large experts) gets an in-memory result.

The ragged-contracting mode (lhs [m, k] and rhs [m, n] contracted along the ragged m, one
k x n product per group: what the gradient w.r.t. rhs is) is `RaggedContractRows`, summed in
memory over row blocks when its [g, k, n] result takes half the allowance at most, else
`RaggedContractByGroup`, a DiskArray written one group at a time from each group's rows read
in blocks. The four ops are bilinear in lhs and rhs, and their transposes are the two products
again (by route, for the cotangents' sizes): the cotangent of ragged_dot's lhs is
ragged_dot(ct, rhs with its last two axes swapped), of its rhs ragged_contract(lhs, ct); so
grad, jvp, jax.checkpoint and higher orders stream. The ragged-batch mode is dot_general (JAX
computes it so: group sizes do not change a batched product), which Jask's dot_general rule
streams. Other forms (more lhs axes, batch dimensions beside a ragged one) are computed by the
XLA route in memory when they fit, else refused.

Shapes and dtypes are checked by JAX's own rule first (its TypeError), and the result has
JAX's dtype (preferred_element_type, int8 x int8 -> int8 or int32). Only group_offset=None is
taken (JAX's own implementation refuses the others too).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._dtypes import storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply
from .._jax.primitives import rule
from ..ops import FromInMemory, ToInMemory, Transpose
from ..ops.block_map import ROWS, SUM, BlockFn, BlockMap, Empty, is_traced, put_block, rows_reader
from .blocked import allowance, nbytes


class _InMemory(NotImplementedError):
    """Raised for a case the XLA route computes (in memory, or with its own refusal)."""


@rule("ragged_dot_general")
def ragged_dot_general(
    lhs,
    rhs,
    group_sizes,
    *,
    ragged_dot_dimension_numbers,
    precision,
    preferred_element_type,
    group_offset=None,
    out_sharding=None,
):
    """jax.lax.ragged_dot_general with a DiskArray among its operands, by the rules above."""
    dims = ragged_dot_dimension_numbers
    params = dict(precision=precision, preferred=preferred_element_type)
    out = _out_aval(lhs, rhs, group_sizes, dims, **params)  # JAX's own checks: its errors
    held = sum(
        nbytes(compat.typeof(x)) for x in (lhs, rhs, group_sizes) if isinstance(x, DiskArray)
    )
    if held + nbytes(out) <= allowance() or group_offset is not None:
        raise _InMemory("ragged_dot_general: the XLA route's case")
    (lc, rc), (lb, rb) = dims.dot_dimension_numbers
    ragged = dims.lhs_ragged_dimensions[0]
    if ragged in lb:  # JAX's rule: the dot_general of the operands, group sizes aside
        return jax.lax.dot_general(
            lhs,
            rhs,
            ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
            precision=precision,
            preferred_element_type=preferred_element_type,
        )
    group_sizes = _in_memory(group_sizes)
    plain = ragged == 0 and group_sizes.ndim == 1 and np.ndim(lhs) == 2 and not len(lb)
    if plain and ragged not in lc:
        perm = _group_major(dims, np.ndim(rhs))
        if perm is not None:
            result = ragged_dot(lhs, _permuted(rhs, perm), group_sizes, **params)
            if not isinstance(lhs, DiskArray) and nbytes(out) <= allowance() // 2:
                return apply(ToInMemory, result)  # a few in-memory tokens through large experts
            return result
    if plain and tuple(lc) == (0,) and tuple(rc) == (0,) and np.ndim(rhs) == 2:
        return ragged_contract(lhs, rhs, group_sizes, **params)
    raise _unsupported(lhs, rhs, group_sizes)


def _out_aval(lhs, rhs, group_sizes, dims, *, precision, preferred):
    structs = [
        jax.ShapeDtypeStruct(np.shape(x), compat.typeof(x).dtype) for x in (lhs, rhs, group_sizes)
    ]
    return jax.eval_shape(
        functools.partial(
            jax.lax.ragged_dot_general,
            ragged_dot_dimension_numbers=dims,
            precision=precision,
            preferred_element_type=preferred,
        ),
        *structs,
    )


def _group_major(dims, rhs_ndim) -> tuple[int, ...] | None:
    """For lhs [m, k] and a 3-d rhs of one group, one contracting and one kept axis, the
    permutation of rhs's axes to jax.lax.ragged_dot's [g, k, n]; None for other forms."""
    (lc, rc), _ = dims.dot_dimension_numbers
    if rhs_ndim != 3 or tuple(lc) != (1,) or len(rc) != 1:
        return None
    group, contract = dims.rhs_group_dimensions[0], rc[0]
    (kept,) = {0, 1, 2} - {group, contract}
    return (group, contract, kept)


def _permuted(x, perm):
    if tuple(perm) == tuple(range(len(perm))):
        return x
    if isinstance(x, DiskArray):
        return apply(Transpose, x, perm=tuple(perm))  # a streamed copy
    return jnp.transpose(x, perm)


def _swapped(x):
    """x [g, a, b] as [g, b, a]."""
    return _permuted(x, (0, 2, 1))


def _in_memory(x):
    return apply(ToInMemory, x) if isinstance(x, DiskArray) else x


def _on_disk(x):
    return x if isinstance(x, DiskArray) else apply(FromInMemory, x)


def _unsupported(lhs, rhs, group_sizes, what: str = "") -> NotImplementedError:
    operands = ", ".join(compat.describe_operand(a) for a in (lhs, rhs, group_sizes))
    return NotImplementedError(
        f"jax.lax.ragged_dot_general on a DiskArray ({operands}){compat.user_frame()}: Jask "
        f"computes it larger than half the memory budget ({_runtime.memory_budget()} bytes; "
        f"jask.set_memory_budget) for lhs [m, k] ragged along m with a [g, k, n]-like rhs "
        f"(jax.lax.ragged_dot's form), for its gradient's form (lhs [m, k] and rhs [m, n] "
        f"contracted along the ragged m) and for a ragged batch dimension"
        + (f"; here {what}" if what else "; this call has another form")
    )


def block_group_sizes(rows, group_sizes):
    """The number of rows of each group among `rows` (consecutive row numbers): the groups'
    row ranges [end - size, end) clipped to the block's."""
    start, count = rows[0], rows.shape[0]
    ends = jnp.cumsum(group_sizes)
    starts = ends - group_sizes
    clip = lambda e: jnp.clip(e - start, 0, count)  # noqa: E731
    return (clip(ends) - clip(starts)).astype(group_sizes.dtype)


def _row_bytes(x) -> int:
    aval = compat.typeof(x)
    return nbytes(aval) // max(aval.shape[0], 1)


# -- the two products, by route ------------------------------------------------------------


def ragged_dot(lhs, rhs, group_sizes, *, precision, preferred):
    """ragged_dot(lhs [m, k], rhs [g, k, n], group_sizes) as a DiskArray [m, n]: rhs whole
    when it takes a third of the allowance at most and leaves room for row blocks (route 2
    above), else one group's matrix at a time."""
    m, g = np.shape(lhs)[0], np.shape(rhs)[0]
    params = dict(precision=precision, preferred=preferred)
    dtype = _product_dtype(compat.typeof(lhs).dtype, compat.typeof(rhs).dtype, preferred)
    lhs_row, out_row = _row_bytes(lhs), np.shape(rhs)[2] * dtype.itemsize
    rhs_bytes = nbytes(compat.typeof(rhs))
    group_bytes = rhs_bytes // max(g, 1)
    # per row: the block, its masked copy, the product and the sum
    by_group = _Blocks(2 * lhs_row + 2 * out_row, 2 * group_bytes, m)
    # XLA's ragged dot on CPU expands a block of lhs to [g, B, k]: g rows per row
    whole = _Blocks(lhs_row * (g + 1) + out_row + 4, rhs_bytes, m, share=2)
    if 3 * rhs_bytes <= allowance() and whole.not_much_smaller(by_group):
        return apply(RaggedDotRows, lhs, rhs, group_sizes, **params, block=whole.block)
    if not by_group.fit:
        raise _unsupported(lhs, rhs, group_sizes, "one group's rhs is larger than that allows")
    return apply(
        RaggedDotByGroup, _on_disk(lhs), _on_disk(rhs), group_sizes, **params, block=by_group.block
    )


def ragged_contract(lhs, rhs, group_sizes, *, precision, preferred):
    """The ragged-contracting product of lhs [m, k] and rhs [m, n]: one lhs[rows of i].T @
    rhs[rows of i] per group, [g, k, n], summed in memory over row blocks when it takes half
    the allowance at most (a DiskArray written group by group otherwise)."""
    m, g = np.shape(lhs)[0], np.shape(group_sizes)[0]
    params = dict(precision=precision, preferred=preferred)
    dtype = _product_dtype(compat.typeof(lhs).dtype, compat.typeof(rhs).dtype, preferred)
    out_bytes = g * np.shape(lhs)[1] * np.shape(rhs)[1] * dtype.itemsize
    lhs_row, rhs_row = _row_bytes(lhs), _row_bytes(rhs)
    by_group = _Blocks(2 * (lhs_row + rhs_row), 2 * (out_bytes // max(g, 1)), m)
    summed = _Blocks((lhs_row + rhs_row) * (g + 1) + 4, 2 * out_bytes, m, share=2)
    if out_bytes <= allowance() // 2 and summed.not_much_smaller(by_group):
        return apply(RaggedContractRows, lhs, rhs, group_sizes, **params, block=summed.block)
    if not by_group.fit:
        raise _unsupported(lhs, rhs, group_sizes, "one group's result is larger than that allows")
    return apply(
        RaggedContractByGroup,
        _on_disk(lhs),
        _on_disk(rhs),
        group_sizes,
        **params,
        block=by_group.block,
    )


class _Blocks:
    """Row blocks of `per_row` bytes a row beside `held` bytes, within the allowance, or
    within 1/share of it: XLA's temporaries of the whole-rhs routes' loops add up in a
    gradient's program (the forward and the two transposed products), which must hold at most
    the allowance in all."""

    def __init__(self, per_row: int, held: int, m: int, share: int = 1):
        room = allowance() // share - held
        self.fit = room >= per_row
        self.block = int(max(1, min(m, room // max(per_row, 1))))

    def not_much_smaller(self, other: _Blocks) -> bool:
        """Whether these blocks are an eighth of the other's at least (XLA's ragged dot holds
        g copies of a block: with many groups the whole-rhs routes' blocks shrink to a row)."""
        return self.fit and 8 * self.block >= other.block


def _product_dtype(lhs_dtype, rhs_dtype, preferred) -> np.dtype:
    """The dtype of lhs @ rhs as JAX's dot_general gives it (ragged_dot_general defers to it)."""
    out = jax.eval_shape(
        lambda a, b: jax.lax.dot_general(
            a, b, (((1,), (0,)), ((), ())), preferred_element_type=preferred
        ),
        jax.ShapeDtypeStruct((1, 1), lhs_dtype),
        jax.ShapeDtypeStruct((1, 1), rhs_dtype),
    )
    return np.dtype(out.dtype)


def _like(ct, aval):
    """A cotangent of an operand of type `aval`: its dtype (JAX's transpose converts so too)
    and its kind (a DiskArray's is a DiskArray, an in-memory operand's in memory)."""
    if ct.dtype != aval.dtype:
        ct = ct.astype(aval.dtype)
    if isinstance(aval, DiskArrayTy) and not isinstance(ct, DiskArray):
        return apply(FromInMemory, ct)
    if not isinstance(aval, DiskArrayTy) and isinstance(ct, DiskArray):
        return apply(ToInMemory, ct)
    return ct


class _Product(Op):
    """The four ops' shared declaration: bilinear in lhs and rhs (group_sizes are indices),
    their expansion driving other ops (BlockMap, or `rows`, `empty` and `put_block`)."""

    kernel = None
    bilinear = True

    def tangent(self, out, operands, tangents):
        return super().tangent(out, operands, (*tangents[:2], None))

    def _params(self):
        return dict(precision=self.precision, preferred=self.preferred)

    def _dot(self, a, b, contract):
        return jax.lax.dot_general(
            a,
            b,
            (contract, ((), ())),
            precision=self.precision,
            preferred_element_type=self.preferred,
        ).astype(self.out_aval.dtype)


def _dot_transpose(op, ct, lhs, rhs, group_sizes, needs):
    """The cotangents of ragged_dot(lhs [m, k], rhs [g, k, n]) given the result's ct [m, n]."""
    ct_lhs = ct_rhs = None
    if needs[0]:  # row r of group i: ct[r] @ rhs[i].T
        ct_lhs = _like(ragged_dot(ct, _swapped(rhs), group_sizes, **op._params()), op.in_avals[0])
    if needs[1]:  # rhs[i]: lhs[rows of i].T @ ct[rows of i]
        ct_rhs = _like(ragged_contract(lhs, ct, group_sizes, **op._params()), op.in_avals[1])
    return ct_lhs, ct_rhs, None


def _contract_transpose(op, ct, lhs, rhs, group_sizes, needs):
    """The cotangents of ragged_contract(lhs [m, k], rhs [m, n]) given ct [g, k, n]."""
    ct_lhs = ct_rhs = None
    if needs[0]:  # lhs[r] of group i: rhs[r] @ ct[i].T
        ct_lhs = _like(ragged_dot(rhs, _swapped(ct), group_sizes, **op._params()), op.in_avals[0])
    if needs[1]:  # rhs[r] of group i: lhs[r] @ ct[i]
        ct_rhs = _like(ragged_dot(lhs, ct, group_sizes, **op._params()), op.in_avals[1])
    return ct_lhs, ct_rhs, None


# -- rhs whole: XLA's ragged_dot per row block ---------------------------------------------

_DOT = jax.lax.RaggedDotDimensionNumbers(
    dot_dimension_numbers=(((1,), (1,)), ((), ())),
    lhs_ragged_dimensions=(0,),
    rhs_group_dimensions=(0,),
)
_CONTRACT = jax.lax.RaggedDotDimensionNumbers(
    dot_dimension_numbers=(((0,), (0,)), ((), ())),
    lhs_ragged_dimensions=(0,),
    rhs_group_dimensions=(),
)


class RaggedDotRows(_Product):
    """ragged_dot(lhs [m, k], rhs [g, k, n]) with rhs whole: a BlockMap over row blocks of lhs
    (DiskArray or in memory), XLA's ragged_dot of each block with its group sizes. The result
    is a DiskArray [m, n]."""

    name = "ragged_dot_rows"

    def out_type(self, lhs, rhs, group_sizes, *, precision, preferred, block):
        dtype = _product_dtype(lhs.dtype, rhs.dtype, preferred)
        return DiskArrayTy((lhs.shape[0], rhs.shape[2]), storage_dtype(dtype))

    def expand(self, lhs, rhs, group_sizes):
        rows = jnp.arange(self.in_avals[0].shape[0], dtype=jnp.int32)
        fn = _rows_fn(_DOT, self.precision, self.preferred, ROWS)
        blocked = (True, True, False, False)
        return apply(
            BlockMap, lhs, rows, rhs, group_sizes, fn=fn, blocked=blocked, block=self.block
        )[0]

    def transpose_rule(self, ct, lhs, rhs, group_sizes, *, needs):
        return _dot_transpose(self, ct, lhs, rhs, group_sizes, needs)


class RaggedContractRows(_Product):
    """The ragged-contracting product of lhs [m, k] and rhs [m, n] (DiskArrays or in memory)
    summed in memory over row blocks: a BlockMap whose result is the [g, k, n] sum."""

    name = "ragged_contract_rows"

    def out_type(self, lhs, rhs, group_sizes, *, precision, preferred, block):
        dtype = _product_dtype(lhs.dtype, rhs.dtype, preferred)
        return compat.ShapedArray((group_sizes.shape[0], lhs.shape[1], rhs.shape[1]), dtype)

    def expand(self, lhs, rhs, group_sizes):
        rows = jnp.arange(self.in_avals[0].shape[0], dtype=jnp.int32)
        fn = _rows_fn(_CONTRACT, self.precision, self.preferred, SUM)
        blocked = (True, True, True, False)
        return apply(
            BlockMap, lhs, rhs, rows, group_sizes, fn=fn, blocked=blocked, block=self.block
        )[0]

    def transpose_rule(self, ct, lhs, rhs, group_sizes, *, needs):
        return _contract_transpose(self, ct, lhs, rhs, group_sizes, needs)


@functools.cache
def _rows_fn(dims, precision, preferred, kind) -> BlockFn:
    """XLA's ragged_dot_general of a row block, its group sizes clipped to the block's rows
    (made once per form, precision and dtype: each compiles once per block shape)."""

    def product(a, b, rows, group_sizes):
        return jax.lax.ragged_dot_general(
            a,
            b,
            block_group_sizes(rows, group_sizes),
            ragged_dot_dimension_numbers=dims,
            precision=precision,
            preferred_element_type=preferred,
        )

    if kind == ROWS:  # operands (lhs, rows, rhs, group_sizes): lhs and rows blocked
        return BlockFn(lambda a, rows, b, s: (product(a, b, rows, s),), (ROWS,), "ragged_dot")
    return BlockFn(lambda a, b, rows, s: (product(a, b, rows, s),), (SUM,), "ragged_contract")


# -- one group's matrix at a time -------------------------------------------------------


def _group_bounds(group_sizes):
    """(starts, ends) of the groups' row ranges, as JAX's rule has them."""
    ends = jnp.cumsum(group_sizes)
    return ends - group_sizes, ends


class _ByGroup(_Product):
    """The shared evaluation of the two group ops: row blocks of `block` rows, the last one
    read as the last `block` rows (one block shape to compile), with the products summed in
    the result's dtype."""

    def expand(self, lhs, rhs, group_sizes):
        _runtime.ensure_scratch()
        if compat.is_eager() and not any(is_traced(x) for x in (lhs, rhs, group_sizes)):
            return self._run_eagerly(lhs, rhs, np.asarray(group_sizes))
        return self._run_lowered(lhs, rhs, jnp.asarray(group_sizes))

    def _block_start(self, pos):
        last = self.in_avals[0].shape[0] - self.block
        return jnp.minimum(pos, last) if compat.is_tracer(pos) else min(int(pos), last)


class RaggedDotByGroup(_ByGroup):
    """ragged_dot(lhs, rhs, group_sizes) for lhs [m, k] and rhs [g, k, n] DiskArrays, one
    rhs[i] in memory at a time: per row block, each group it touches read and its rows
    multiplied (the others masked to zero). The result is a DiskArray [m, n]."""

    name = "ragged_dot_by_group"

    def out_type(self, lhs, rhs, group_sizes, *, precision, preferred, block):
        dtype = _product_dtype(lhs.dtype, rhs.dtype, preferred)
        return DiskArrayTy((lhs.shape[0], rhs.shape[2]), storage_dtype(dtype))

    def transpose_rule(self, ct, lhs, rhs, group_sizes, *, needs):
        return _dot_transpose(self, ct, lhs, rhs, group_sizes, needs)

    def _groups_touched(self, start, starts, ends):
        """The non-empty groups with rows in [start, start + block), in order (eagerly)."""
        hit = (starts < start + self.block) & (ends > start) & (ends > starts)
        return np.flatnonzero(hit)

    def _run_eagerly(self, lhs, rhs, group_sizes):
        m = self.in_avals[0].shape[0]
        starts, ends = (np.asarray(b) for b in _group_bounds(group_sizes))
        target = Empty(dtype=self.out_aval.dtype, shape=self.out_aval.shape)._run_eagerly(())
        for pos in range(0, m, self.block):
            start = self._block_start(pos)
            rows = rows_reader(lhs.aval, self.block)._run_eagerly((lhs, np.int32(start)))
            total = jnp.zeros((self.block, self.out_aval.shape[1]), self.out_aval.dtype)
            for i in self._groups_touched(start, starts, ends):
                weights = rows_reader(rhs.aval, 1)._run_eagerly((rhs, np.int32(i)))
                total = _add_group(self, total, rows, weights, start, starts[i], ends[i])
            put_block(target, total)._run_eagerly((target, np.int32(start), total))
        return target

    def _run_lowered(self, lhs, rhs, group_sizes):
        m = self.in_avals[0].shape[0]
        g = group_sizes.shape[0]
        starts, ends = _group_bounds(group_sizes)
        aval = self.out_aval
        handle = Empty(dtype=aval.dtype, shape=aval.shape)._lower(())._lowered_handle()

        def block_step(index, handle):
            start = jnp.asarray(self._block_start(index * self.block), jnp.int32)
            rows = rows_reader(lhs.aval, self.block)._lower((lhs, start))
            hit = (starts < start + self.block) & (ends > start) & (ends > starts)
            order = jnp.sort(jnp.where(hit, jnp.arange(g, dtype=jnp.int32), g))
            count = jnp.sum(hit, dtype=jnp.int32)

            def group_step(j, total):
                i = order[j]
                weights = rows_reader(rhs.aval, 1)._lower((rhs, i))
                return _add_group.__wrapped__(self, total, rows, weights, start, starts[i], ends[i])

            total = jnp.zeros((self.block, aval.shape[1]), aval.dtype)
            total = jax.lax.fori_loop(0, count, group_step, total)
            target = DiskArray(aval, handle)
            return put_block(target, total)._lower((target, start, total))._lowered_handle()

        handle = jax.lax.fori_loop(0, -(-m // self.block), block_step, handle)
        return DiskArray(aval, handle)

    def __repr__(self):
        return f"jask.ragged_dot_by_group[block={self.block}]"


class RaggedContractByGroup(_ByGroup):
    """The ragged-contracting product of lhs [m, k] and rhs [m, n] DiskArrays: result[i] =
    lhs[rows of i].T @ rhs[rows of i], a DiskArray [g, k, n] written one group at a time, each
    group's rows of both read in blocks (zeros for an empty group)."""

    name = "ragged_contract_by_group"

    def out_type(self, lhs, rhs, group_sizes, *, precision, preferred, block):
        dtype = _product_dtype(lhs.dtype, rhs.dtype, preferred)
        g = group_sizes.shape[0]
        return DiskArrayTy((g, lhs.shape[1], rhs.shape[1]), storage_dtype(dtype))

    def transpose_rule(self, ct, lhs, rhs, group_sizes, *, needs):
        return _contract_transpose(self, ct, lhs, rhs, group_sizes, needs)

    def _group_rows(self, starts, ends, i):
        """The first row of group i's blocks and the end of its rows within [0, m)."""
        m = self.in_avals[0].shape[0]
        if compat.is_tracer(starts):
            return jnp.clip(starts[i], 0, m), jnp.clip(ends[i], 0, m)
        return int(np.clip(starts[i], 0, m)), int(np.clip(ends[i], 0, m))

    def _run_eagerly(self, lhs, rhs, group_sizes):
        starts, ends = (np.asarray(b) for b in _group_bounds(group_sizes))
        target = Empty(dtype=self.out_aval.dtype, shape=self.out_aval.shape)._run_eagerly(())
        for i in range(self.out_aval.shape[0]):
            first, end = self._group_rows(starts, ends, i)
            total = jnp.zeros((1, *self.out_aval.shape[1:]), self.out_aval.dtype)
            for pos in range(first, end, self.block):
                start = self._block_start(pos)
                a = rows_reader(lhs.aval, self.block)._run_eagerly((lhs, np.int32(start)))
                b = rows_reader(rhs.aval, self.block)._run_eagerly((rhs, np.int32(start)))
                total = _add_rows(self, total, a, b, start, pos, end)
            put_block(target, total)._run_eagerly((target, np.int32(i), total))
        return target

    def _run_lowered(self, lhs, rhs, group_sizes):
        starts, ends = _group_bounds(group_sizes)
        aval = self.out_aval
        handle = Empty(dtype=aval.dtype, shape=aval.shape)._lower(())._lowered_handle()

        def group_step(i, handle):
            first, end = self._group_rows(starts, ends, i)

            def row_step(j, total):
                pos = first + j * self.block
                start = jnp.asarray(self._block_start(pos), jnp.int32)
                a = rows_reader(lhs.aval, self.block)._lower((lhs, start))
                b = rows_reader(rhs.aval, self.block)._lower((rhs, start))
                return _add_rows.__wrapped__(self, total, a, b, start, pos, end)

            total = jnp.zeros((1, *aval.shape[1:]), aval.dtype)
            n_blocks = (jnp.maximum(end - first, 0) + self.block - 1) // self.block
            total = jax.lax.fori_loop(0, n_blocks, row_step, total)
            target = DiskArray(aval, handle)
            at = jnp.asarray(i, jnp.int32)
            return put_block(target, total)._lower((target, at, total))._lowered_handle()

        handle = jax.lax.fori_loop(0, aval.shape[0], group_step, handle)
        return DiskArray(aval, handle)

    def __repr__(self):
        return f"jask.ragged_contract_by_group[block={self.block}]"


@functools.partial(jax.jit, static_argnums=0)
def _add_group(op, total, rows, weights, start, first, end):
    """total + the product of the block's rows of one group (rows [first, end) of lhs) with
    the group's matrix; the block's other rows add zeros."""
    r = start + jnp.arange(rows.shape[0])
    mask = (r >= first) & (r < end)
    masked = jnp.where(mask[:, None], rows, jnp.zeros((), rows.dtype))
    return total + op._dot(masked, weights[0], ((1,), (0,)))


@functools.partial(jax.jit, static_argnums=0)
def _add_rows(op, total, a, b, start, pos, end):
    """total + a[rows].T @ b[rows] for the block's rows in [pos, end) (a block read from
    `start` <= pos holds rows of the block before it, already counted)."""
    r = start + jnp.arange(a.shape[0])
    mask = (r >= pos) & (r < end)
    masked = jnp.where(mask[:, None], a, jnp.zeros((), a.dtype))
    return total + op._dot(masked, b, ((0,), (0,)))[None]
