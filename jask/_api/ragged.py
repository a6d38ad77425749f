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
2. **rhs fits** (a third of the allowance at most): a `BlockMap` over row blocks of lhs,
   rhs whole, XLA's ragged_dot per block. Its derivatives are BlockMaps of JAX's own: lhs's
   cotangent in row blocks, rhs's (a ragged-contracting product, [g, k, n]) summed over blocks.
3. **Only one group's matrix fits**: `RaggedDotByGroup`. Per row block, the groups it touches
   (the first with end_i > s, the last with start_i < s + B: a dynamic range under jit) are
   read one rhs[i] at a time and the block's rows of group i multiplied by it. Its lhs
   cotangent is the same op with rhs's last two axes swapped; its rhs cotangent
   `RaggedContractByGroup` ([g, k, n], a DiskArray) reads each group's rows of lhs and of the
   cotangent in blocks and writes group i's k x n sum. An in-memory lhs whose result takes at
   most half the allowance (a few tokens through large experts) gets an in-memory result.

The ragged-contracting mode (lhs [m, ...] and rhs [m, ...] contracted along the ragged m, one
result per group: what the gradient w.r.t. rhs is) sums ragged_dot_general over row blocks
when its [g, ...] result fits half the allowance, else is `RaggedContractByGroup`. The ragged-batch
mode is dot_general (JAX computes it so: group sizes do not change a batched product), which
Jask's dot_general rule streams.

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
from ..ops import FromInMemory, Rows, ToInMemory, Transpose
from ..ops.block_map import ROWS, SUM, BlockFn, BlockMap, Empty, PutBlock
from .blocked import allowance, nbytes

NONCONTRACTING, CONTRACTING, BATCH = "noncontracting", "contracting", "batch"


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
    spec = _Spec(dims, precision, preferred_element_type)
    out = _out_aval(lhs, rhs, group_sizes, spec)  # JAX's own checks: its errors
    held = sum(
        nbytes(compat.typeof(x)) for x in (lhs, rhs, group_sizes) if isinstance(x, DiskArray)
    )
    if held + nbytes(out) <= allowance() or group_offset is not None:
        raise _InMemory("ragged_dot_general: the XLA route's case")
    mode = _mode(np.ndim(lhs), dims)
    if mode == BATCH:  # JAX's rule: the dot_general of the operands, group sizes aside
        (lc, rc), (lb, rb) = dims.dot_dimension_numbers
        return jax.lax.dot_general(
            lhs,
            rhs,
            ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
            precision=precision,
            preferred_element_type=preferred_element_type,
        )
    group_sizes = _in_memory(group_sizes)
    if group_sizes.ndim != 1 or dims.lhs_ragged_dimensions[0] != 0 or _has_batch(dims):
        raise _unsupported(lhs, rhs, group_sizes, "a ragged dimension other than lhs's first")
    if mode == NONCONTRACTING:
        return _noncontracting(lhs, rhs, group_sizes, spec, out)
    return _contracting(lhs, rhs, group_sizes, spec, out)


class _Spec:
    """The primitive's static params (hashable: block functions are made once per spec)."""

    def __init__(self, dims, precision, preferred_element_type):
        self.dims, self.precision = dims, precision
        self.preferred = preferred_element_type
        self._key = (dims, precision, preferred_element_type)

    def __eq__(self, other):
        return isinstance(other, _Spec) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def ragged_dot(self, lhs, rhs, group_sizes, dims=None):
        return jax.lax.ragged_dot_general(
            lhs,
            rhs,
            group_sizes,
            ragged_dot_dimension_numbers=self.dims if dims is None else dims,
            precision=self.precision,
            preferred_element_type=self.preferred,
        )


def _out_aval(lhs, rhs, group_sizes, spec: _Spec):
    structs = [
        jax.ShapeDtypeStruct(np.shape(x), compat.typeof(x).dtype) for x in (lhs, rhs, group_sizes)
    ]
    return jax.eval_shape(spec.ragged_dot, *structs)


def _mode(lhs_ndim: int, dims) -> str:
    (lc, _), (lb, _) = dims.dot_dimension_numbers
    ragged = dims.lhs_ragged_dimensions[0]
    if ragged in lc:
        return CONTRACTING
    if ragged in lb:
        return BATCH
    return NONCONTRACTING


def _has_batch(dims) -> bool:
    (_, _), (lb, rb) = dims.dot_dimension_numbers
    return bool(len(lb) or len(rb))


def _in_memory(x):
    return apply(ToInMemory, x) if isinstance(x, DiskArray) else x


def _unsupported(lhs, rhs, group_sizes, what: str) -> NotImplementedError:
    operands = ", ".join(compat.describe_operand(a) for a in (lhs, rhs, group_sizes))
    return NotImplementedError(
        f"jax.lax.ragged_dot_general on a DiskArray ({operands}){compat.user_frame()}: Jask "
        f"streams the ragged dimension when it is lhs's first axis, with no batch dimensions "
        f"(jax.lax.ragged_dot's form and its gradient's); this call has {what} and does not "
        f"fit half the memory budget ({_runtime.memory_budget()} bytes; jask.set_memory_budget)"
    )


def block_group_sizes(rows, group_sizes):
    """The number of rows of each group among `rows` (consecutive row numbers): the groups'
    row ranges [end - size, end) clipped to the block's."""
    start, count = rows[0], rows.shape[0]
    ends = jnp.cumsum(group_sizes)
    starts = ends - group_sizes
    clip = lambda e: jnp.clip(e - start, 0, count)  # noqa: E731
    return (clip(ends) - clip(starts)).astype(group_sizes.dtype)


def _fits_whole(x) -> bool:
    """Whether rhs is held whole beside row blocks: a third of the allowance at most, as its
    gradient holds it, the sum of its cotangent and one block's term of that sum."""
    return 3 * nbytes(compat.typeof(x)) <= allowance()


def _row_block(per_row: int, held: int, m: int) -> int:
    room = allowance() - held
    return int(max(1, min(m, room // max(per_row, 1))))


# -- the non-contracting mode -----------------------------------------------------------


def _noncontracting(lhs, rhs, group_sizes, spec, out):
    m = np.shape(lhs)[0]
    lhs_row = nbytes(compat.typeof(lhs)) // max(m, 1)
    out_row = nbytes(out) // max(m, 1)
    g = group_sizes.shape[0]
    if _fits_whole(rhs):
        # XLA expands a block of lhs to [g, B, ...] (its ragged dot on CPU): g rows per row
        per_row = lhs_row * (g + 1) + out_row + 4
        held = nbytes(compat.typeof(rhs)) if isinstance(rhs, DiskArray) else 0
        block = _row_block(per_row, held, m)
        rows = jnp.arange(m, dtype=jnp.int32)
        (result,) = apply(
            BlockMap,
            lhs,
            rows,
            rhs,
            group_sizes,
            fn=_noncontracting_block_fn(spec),
            blocked=(True, True, False, False),
            block=block,
        )
        return result
    perm = _group_major(spec.dims, np.ndim(lhs), np.ndim(rhs))
    if perm is None:
        raise _unsupported(lhs, rhs, group_sizes, "an rhs larger than the budget in a general form")
    if perm != (0, 1, 2):  # rhs as [g, k, n] (a streamed copy): lhs's gradient has [g, n, k]
        rhs = apply(Transpose, _on_disk(rhs), perm=perm)
    group_bytes = nbytes(compat.typeof(rhs)) // max(g, 1)
    per_row = 2 * lhs_row + 2 * out_row  # the block, its masked copy, the product and its sum
    block = _row_block(per_row, 2 * group_bytes, m)
    if 2 * group_bytes + per_row > allowance():
        raise _unsupported(lhs, rhs, group_sizes, "one group's rhs larger than the budget allows")
    result = apply(
        RaggedDotByGroup,
        _on_disk(lhs),
        _on_disk(rhs),
        group_sizes,
        precision=spec.precision,
        preferred=spec.preferred,
        block=block,
    )
    if not isinstance(lhs, DiskArray) and nbytes(out) <= allowance() // 2:
        return apply(ToInMemory, result)  # a few in-memory tokens through large experts
    return result


@functools.cache
def _noncontracting_block_fn(spec: _Spec) -> BlockFn:
    def fn(lhs, rows, rhs, group_sizes):
        return (spec.ragged_dot(lhs, rhs, block_group_sizes(rows, group_sizes)),)

    return BlockFn(fn, (ROWS,), "ragged_dot")


def _group_major(dims, lhs_ndim, rhs_ndim) -> tuple[int, ...] | None:
    """For lhs [m, k] and a 3-d rhs of one group, one contracting and one kept axis, the
    permutation of rhs's axes to jax.lax.ragged_dot's [g, k, n]; None for other forms."""
    (lc, rc), _ = dims.dot_dimension_numbers
    if lhs_ndim != 2 or rhs_ndim != 3 or tuple(lc) != (1,) or len(rc) != 1:
        return None
    group, contract = dims.rhs_group_dimensions[0], rc[0]
    (kept,) = {0, 1, 2} - {group, contract}
    return (group, contract, kept)


def _on_disk(x):
    return x if isinstance(x, DiskArray) else apply(FromInMemory, x)


# -- the contracting mode -----------------------------------------------------------


def _contracting(lhs, rhs, group_sizes, spec, out):
    (lc, rc), _ = spec.dims.dot_dimension_numbers
    if tuple(lc) != (0,) or tuple(rc) != (0,):
        raise _unsupported(lhs, rhs, group_sizes, "contracting dimensions beside the ragged one")
    m = np.shape(lhs)[0]
    lhs_row = nbytes(compat.typeof(lhs)) // max(m, 1)
    rhs_row = nbytes(compat.typeof(rhs)) // max(m, 1)
    g = group_sizes.shape[0]
    if nbytes(out) <= allowance() // 2:  # the result summed in memory over row blocks
        per_row = (lhs_row + rhs_row) * (g + 1) + 4
        block = _row_block(per_row, 2 * nbytes(out), m)
        rows = jnp.arange(m, dtype=jnp.int32)
        (result,) = apply(
            BlockMap,
            lhs,
            rhs,
            rows,
            group_sizes,
            fn=_contracting_block_fn(spec),
            blocked=(True, True, True, False),
            block=block,
        )
        return result
    if np.ndim(lhs) != 2 or np.ndim(rhs) != 2:
        raise _unsupported(lhs, rhs, group_sizes, "a result larger than the budget in this form")
    group_bytes = nbytes(out) // max(g, 1)
    per_row = 2 * (lhs_row + rhs_row)
    if 2 * group_bytes + per_row > allowance():
        raise _unsupported(lhs, rhs, group_sizes, "one group's result larger than the budget")
    block = _row_block(per_row, 2 * group_bytes, m)
    return apply(
        RaggedContractByGroup,
        _on_disk(lhs),
        _on_disk(rhs),
        group_sizes,
        precision=spec.precision,
        preferred=spec.preferred,
        block=block,
    )


@functools.cache
def _contracting_block_fn(spec: _Spec) -> BlockFn:
    def fn(lhs, rhs, rows, group_sizes):
        return (spec.ragged_dot(lhs, rhs, block_group_sizes(rows, group_sizes)),)

    return BlockFn(fn, (SUM,), "ragged_dot[contracting]")


# -- one group's matrix at a time -------------------------------------------------------


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


def _group_bounds(group_sizes):
    """(starts, ends) of the groups' row ranges, as JAX's rule has them."""
    ends = jnp.cumsum(group_sizes)
    return ends - group_sizes, ends


class _ByGroup(Op):
    """The shared evaluation of the two group ops: row blocks of `block` rows, the last one
    read as the last `block` rows (one block shape to compile), with the products summed in
    the result's dtype."""

    kernel = None  # no engine kernel of its own: expand drives `rows`, `empty` and `put_block`
    bilinear = True  # in lhs and rhs; group_sizes are indices

    def tangent(self, out, operands, tangents):
        return super().tangent(out, operands, (*tangents[:2], None))

    def expand(self, lhs, rhs, group_sizes):
        _runtime.ensure_scratch()
        if compat.is_eager() and not any(_traced(x) for x in (lhs, rhs, group_sizes)):
            return self._run_eagerly(lhs, rhs, np.asarray(group_sizes))
        return self._run_lowered(lhs, rhs, jnp.asarray(group_sizes))

    def _block_start(self, pos):
        last = self.in_avals[0].shape[0] - self.block
        return jnp.minimum(pos, last) if compat.is_tracer(pos) else min(int(pos), last)

    def _dot(self, a, b, contract):
        return jax.lax.dot_general(
            a,
            b,
            (contract, ((), ())),
            precision=self.precision,
            preferred_element_type=self.preferred,
        ).astype(self.out_aval.dtype)


class RaggedDotByGroup(_ByGroup):
    """ragged_dot(lhs, rhs, group_sizes) for lhs [m, k] and rhs [g, k, n] DiskArrays, one
    rhs[i] in memory at a time: per row block, each group it touches read and its rows
    multiplied (the others masked to zero). The result is a DiskArray [m, n]."""

    name = "ragged_dot_by_group"

    def out_type(self, lhs, rhs, group_sizes, *, precision, preferred, block):
        dtype = _product_dtype(lhs.dtype, rhs.dtype, preferred)
        return DiskArrayTy((lhs.shape[0], rhs.shape[2]), storage_dtype(dtype))

    def transpose_rule(self, ct, lhs, rhs, group_sizes, *, needs):
        params = dict(precision=self.precision, preferred=self.preferred, block=self.block)
        ct_lhs = ct_rhs = None
        if needs[0]:  # row r of group i: ct[r] @ rhs[i].T
            rhs_t = apply(Transpose, rhs, perm=(0, 2, 1))
            ct_lhs = _as(
                apply(RaggedDotByGroup, ct, rhs_t, group_sizes, **params), self.in_avals[0]
            )
        if needs[1]:  # rhs[i]: lhs[rows of i].T @ ct[rows of i]
            ct_rhs = _as(
                apply(RaggedContractByGroup, lhs, ct, group_sizes, **params), self.in_avals[1]
            )
        return ct_lhs, ct_rhs, None

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
            rows = _rows(lhs.aval, self.block)._run_eagerly((lhs, np.int32(start)))
            total = jnp.zeros((self.block, self.out_aval.shape[1]), self.out_aval.dtype)
            for i in self._groups_touched(start, starts, ends):
                weights = _rows(rhs.aval, 1)._run_eagerly((rhs, np.int32(i)))
                total = _add_group(self, total, rows, weights, start, starts[i], ends[i])
            _put_block(target, total)._run_eagerly((target, np.int32(start), total))
        return target

    def _run_lowered(self, lhs, rhs, group_sizes):
        m = self.in_avals[0].shape[0]
        g = group_sizes.shape[0]
        starts, ends = _group_bounds(group_sizes)
        aval = self.out_aval
        handle = Empty(dtype=aval.dtype, shape=aval.shape)._lower(())._lowered_handle()

        def block_step(index, handle):
            start = jnp.asarray(self._block_start(index * self.block), jnp.int32)
            rows = _rows(lhs.aval, self.block)._lower((lhs, start))
            hit = (starts < start + self.block) & (ends > start) & (ends > starts)
            order = jnp.sort(jnp.where(hit, jnp.arange(g, dtype=jnp.int32), g))
            count = jnp.sum(hit, dtype=jnp.int32)

            def group_step(j, total):
                i = order[j]
                weights = _rows(rhs.aval, 1)._lower((rhs, i))
                return _add_group.__wrapped__(self, total, rows, weights, start, starts[i], ends[i])

            total = jnp.zeros((self.block, aval.shape[1]), aval.dtype)
            total = jax.lax.fori_loop(0, count, group_step, total)
            target = DiskArray(aval, handle)
            return _put_block(target, total)._lower((target, start, total))._lowered_handle()

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
        params = dict(precision=self.precision, preferred=self.preferred, block=self.block)
        ct_lhs = ct_rhs = None
        if needs[0]:  # lhs[r] of group i: rhs[r] @ ct[i].T
            ct_t = apply(Transpose, ct, perm=(0, 2, 1))
            ct_lhs = _as(
                apply(RaggedDotByGroup, rhs, ct_t, group_sizes, **params), self.in_avals[0]
            )
        if needs[1]:  # rhs[r] of group i: lhs[r] @ ct[i]
            ct_rhs = _as(apply(RaggedDotByGroup, lhs, ct, group_sizes, **params), self.in_avals[1])
        return ct_lhs, ct_rhs, None

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
                a = _rows(lhs.aval, self.block)._run_eagerly((lhs, np.int32(start)))
                b = _rows(rhs.aval, self.block)._run_eagerly((rhs, np.int32(start)))
                total = _add_rows(self, total, a, b, start, pos, end)
            _put_block(target, total)._run_eagerly((target, np.int32(i), total))
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
                a = _rows(lhs.aval, self.block)._lower((lhs, start))
                b = _rows(rhs.aval, self.block)._lower((rhs, start))
                return _add_rows.__wrapped__(self, total, a, b, start, pos, end)

            total = jnp.zeros((1, *aval.shape[1:]), aval.dtype)
            n_blocks = (jnp.maximum(end - first, 0) + self.block - 1) // self.block
            total = jax.lax.fori_loop(0, n_blocks, row_step, total)
            target = DiskArray(aval, handle)
            at = jnp.asarray(i, jnp.int32)
            return _put_block(target, total)._lower((target, at, total))._lowered_handle()

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


def _as(ct, aval):
    """A cotangent in its operand's dtype (JAX's transpose converts so too)."""
    return ct if ct.dtype == aval.dtype else ct.astype(aval.dtype)


def _rows(aval, count) -> Rows:
    """The engine's reader of `count` rows from a start row (called through its eager or
    lowered path: the expansion is already inside a bind)."""
    return Rows(aval, compat.ShapedArray((), np.dtype(np.int32)), count=count)


def _put_block(target, block) -> PutBlock:
    int32 = compat.ShapedArray((), np.dtype(np.int32))
    return PutBlock(target.aval, int32, compat.ShapedArray(block.shape, block.dtype))


def _traced(x) -> bool:
    return compat.is_tracer(x._handle if isinstance(x, DiskArray) else x)
