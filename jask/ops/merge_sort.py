"""Sorting rows longer than the memory budget holds (external merge sort): `MergeSort`.

The operands are flat arrays of `rows` rows of `length` elements each (the sorted axis last,
rows one after another). Each row is sorted by the first `num_keys` operands (lexicographic,
stable), every operand moved along, and the first `keep` elements of each row are the results;
with `positions`, so are their int32 positions in the row (lax.top_k's indices, or what a
derivative puts back in place). The order is lax.sort's (NaNs last, -0.0 == 0.0), or with
`descending` lax.top_k's: IEEE totalOrder largest first, ties by position.

XLA computes, Jask moves the bytes: the order is an in-memory stable `lax.sort` of each window's
keys, so it is exactly JAX's for every dtype and number of keys (one key of 32 bits or less is
sorted as one int32 in the order JAX's comparator gives it: totalOrder after making NaNs one
NaN and -0.0 zero, or top_k's totalOrder). A window sorts its keys and an index only, and
gathers its arrays along the index (XLA's sort holds scratch for every array it sorts). With W
the window (elements per read, from the memory budget):
1. runs: each block of W elements of a row is sorted in memory and written to a scratch array;
2. merges: runs of L are merged pairwise into runs of 2L, one pass per doubling. The pair (A, B)
   is output W elements at a time: with i and j the elements of A and B output so far, a window
   of W elements of A at i and one of B at j are read (clamped to the array); their elements
   not yet output (A's from i to A's end, B's from j) are put in a row, A's first, and sorted
   stably, the others after them. The first W of that are the next W of the merge (every
   element after them in either window comes after them in the merge), and i and j advance by
   how many of them came from each. The last pass writes only the first `keep` elements of
   each row, into the results.
When `keep` is at most a window and less than the row (lax.top_k of a small k), one read of the
row does it instead: the best `keep` so far and the next block, sorted together, give the best
`keep` so far.

A row is held W elements at a time, beside the other W and the sort's copies; scratch arrays
hold the runs (rows padded to whole windows: the padding is never valid). Eagerly the passes are
Python loops, inside a jitted program fori_loops of the program (jask/ops/_block_io.py).

Derivatives: each result is its operand taken along the order, which is piecewise constant. A
tangent is the tangents sorted by the same keys; a cotangent goes back to the positions it came
from by sorting it by those positions (and, for the first `keep` of longer rows, placing the
sorted values among zeros: jask/ops/sorted_positions.py).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._dtypes import storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, describe
from ._block_io import io_for, write_row
from .in_memory import FromInMemory, ToInMemory
from .sorted_positions import ScatterSorted, window_for

INDEX_DTYPE = np.dtype(np.int32)
_INT32_MAX = np.iinfo(np.int32).max


def _bytes_per_window_element(itemsizes, key_bytes: int, sort_keys: int) -> int:
    """Bytes held per element of a window while two windows are merged: the two windows read and
    their concatenation (5 bytes per byte carried, with the W written); per element of the
    concatenation, the keys (computed, gathered into merge order, sorted), the order sorted
    along, and the scratch of XLA's sort (16 bytes per array it sorts, measured: its memory
    analysis does not show it)."""
    return 5 * sum(itemsizes) + 2 * (3 * key_bytes + 8 + 16 * (sort_keys + 1))


def merge_window(itemsizes, key_itemsizes, key_dtype=None) -> int:
    """Elements per read of a merge sort of arrays of these itemsizes (keys of `key_itemsizes`;
    one key of `key_dtype` may be sorted as an int32) at the current budget: half the budget
    for what XLA holds (the other half is the engine's)."""
    if len(key_itemsizes) == 1 and np.dtype(key_dtype) in _INT32_KEYED:
        key_bytes, sort_keys = 4, 1
    else:
        key_bytes, sort_keys = sum(key_itemsizes), len(key_itemsizes)
    per = _bytes_per_window_element(itemsizes, key_bytes, sort_keys)
    return _runtime.memory_budget() // 2 // per


@dataclass(frozen=True)
class _Plan:
    """What the passes of one sort need to know."""

    length: int
    rows: int
    keep: int
    window: int
    num_keys: int
    descending: bool
    dtypes: tuple  # of the carried arrays: the operands, then the positions when kept

    @property
    def blocks(self) -> int:
        return math.ceil(self.length / self.window)


class MergeSort(Op):
    name = "merge_sort"
    kernel = None  # no engine kernel: expand drives `rows`, `empty` and `put_block`
    result = "arrays"

    def out_type(self, *operands, length, num_keys, descending, keep, positions, window):
        size = operands[0].size if operands else 0
        if (
            not operands
            or any(len(o.shape) != 1 or o.size != size for o in operands)
            or length <= 0
            or size % length
        ):
            raise ValueError(
                "jask.merge_sort: operands must be flat arrays of one size, whole rows of "
                f"{length}; got " + ", ".join(describe(o) for o in operands)
            )
        if not 1 <= num_keys <= len(operands) or not 0 <= keep <= length or window < 1:
            raise ValueError(
                f"jask.merge_sort: {num_keys} keys of {len(operands)} operands, keeping {keep} "
                f"of rows of {length} in windows of {window}"
            )
        out = size // length * keep
        types = [DiskArrayTy((out,), storage_dtype(o.dtype)) for o in operands]
        if positions:
            types.append(DiskArrayTy((out,), INDEX_DTYPE))
        return tuple(types)

    def _plan(self) -> _Plan:
        window = min(self.window, self.length)
        return _Plan(
            length=self.length,
            rows=self.in_avals[0].size // self.length,
            keep=self.keep,
            window=window,
            num_keys=self.num_keys,
            descending=self.descending,
            dtypes=tuple(a.dtype for a in self.out_aval),
        )

    # -- evaluation -------------------------------------------------------------------
    def expand(self, *operands):
        _runtime.ensure_scratch()
        io = io_for(operands)
        plan = self._plan()
        if plan.keep == 0:
            return tuple(io.empty(a.dtype, 0) for a in self.out_aval)
        if plan.keep < plan.length and plan.keep <= plan.window:
            return tuple(_best_of_stream(io, plan, operands))
        return tuple(_merge_sort(io, plan, operands))

    # -- derivatives --------------------------------------------------------------------
    def vjp(self, ct, *operands, out, needs):
        cts = ct if isinstance(ct, (tuple, list)) else (ct,)
        wanted = [
            k
            for k, (c, need) in enumerate(zip(cts, needs))
            if need and c is not None and not isinstance(c, compat.Zero)
        ]
        if not wanted:
            return (None,) * len(operands)
        if self.keep == 0:  # nothing kept: nothing flows back
            return tuple(
                _zeros(self.in_avals[k]) if k in wanted else None for k in range(len(operands))
            )
        if out is not None and self.positions:
            positions = out[len(operands)]
        else:
            positions = self._positions(operands)
        back = _put_back(
            positions, [_on_disk(cts[k]) for k in wanted], length=self.length, keep=self.keep
        )
        result = [None] * len(operands)
        for k, c in zip(wanted, back):
            result[k] = c if isinstance(self.in_avals[k], DiskArrayTy) else apply(ToInMemory, c)
        return tuple(result)

    def _positions(self, operands):
        """The kept positions of each row, sorted again from the keys."""
        keys = operands[: self.num_keys]
        if any(isinstance(k, (DiskArrayTy, compat.ShapedArray)) for k in keys):
            raise NotImplementedError(
                "jax.linearize of jask.merge_sort with respect to its keys needs the keys' "
                "values, which a transposed computation does not have"
            )
        return sort_rows(
            *keys,
            length=self.length,
            num_keys=self.num_keys,
            descending=self.descending,
            keep=self.keep,
            positions=True,
        )[-1]

    def tangent(self, out, operands, tangents):
        moving = [
            k
            for k, t in enumerate(tangents)
            if t is not None and jnp.issubdtype(self.in_avals[k].dtype, jnp.inexact)
        ]
        if not moving:
            return None
        sorted_tangents = sort_rows(
            *operands[: self.num_keys],
            *(tangents[k] for k in moving),
            length=self.length,
            num_keys=self.num_keys,
            descending=self.descending,
            keep=self.keep,
        )[self.num_keys :]
        result = [compat.Zero(a.to_tangent_aval()) for a in self.out_aval]
        for k, t in zip(moving, sorted_tangents):
            result[k] = t
        return tuple(result)

    def __repr__(self):
        return (
            f"jask.merge_sort[length={self.length}, keys={self.num_keys}, keep={self.keep}, "
            f"descending={self.descending}, window={self.window}]"
        )


def sort_rows(*operands, length, num_keys, descending=False, keep=None, positions=False):
    """`MergeSort` of flat operands (DiskArrays or in-memory arrays) with the window the budget
    allows."""
    keep = length if keep is None else keep
    itemsizes = [np.dtype(o.dtype).itemsize for o in operands] + [4] * bool(positions)
    key_itemsizes = [np.dtype(o.dtype).itemsize for o in operands[:num_keys]]
    window = merge_window(itemsizes, key_itemsizes, operands[0].dtype)
    rows = operands[0].size // length
    if window < 2:
        needed = 2 * _bytes_per_window_element(itemsizes, sum(key_itemsizes), num_keys)
        raise NotImplementedError(
            f"jax.lax.sort of rows of {length} elements "
            f"({', '.join(describe(o) for o in operands)}): merging windows of two elements "
            f"needs {needed} bytes, more than half the memory budget "
            f"({_runtime.memory_budget()} bytes); raise the budget (jask.set_memory_budget)"
        )
    padded = rows * math.ceil(length / min(window, length)) * min(window, length)
    if padded > _INT32_MAX:
        raise NotImplementedError(
            f"jax.lax.sort of {rows} rows of {length} elements: Jask's merge sort addresses "
            f"elements with int32 offsets (at most {_INT32_MAX} elements)"
        )
    return apply(
        MergeSort,
        *operands,
        length=int(length),
        num_keys=int(num_keys),
        descending=bool(descending),
        keep=int(keep),
        positions=bool(positions),
        window=int(window),
    )


def _zeros(aval):
    if isinstance(aval, DiskArrayTy):
        return aval.vspace_zero()
    return jnp.zeros(aval.shape, aval.dtype)


def _on_disk(x):
    return x if isinstance(x, DiskArray) else apply(FromInMemory, x)


def _put_back(positions, values, *, length: int, keep: int):
    """Each row's values moved back to their positions (zeros at the others): the transpose of
    taking the first `keep` of a row along an order."""
    rows = positions.size // keep
    by_position = sort_rows(positions, *values, length=keep, num_keys=1)
    if keep == length:
        return list(by_position[1:])
    window = window_for([4] + [np.dtype(v.dtype).itemsize for v in values])
    return [
        apply(ScatterSorted, by_position[0], v, length=length, rows=rows, window=window)
        for v in by_position[1:]
    ]


# -- the in-memory steps (one XLA computation per window shape) ----------------------------


def _total_order(x):
    """Signed integers in the IEEE totalOrder of floats x (NaN payloads and -0.0 apart)."""
    bits = jax.lax.bitcast_convert_type(x, np.dtype(f"int{8 * np.dtype(x.dtype).itemsize}"))
    return jnp.where(bits < 0, bits ^ np.iinfo(bits.dtype).max, bits)


def descending_key(x):
    """A key whose ascending order is x's IEEE totalOrder descending (NaN first, 0.0 before
    -0.0): lax.top_k's order."""
    dtype = np.dtype(x.dtype)
    if dtype == np.bool_ or jnp.issubdtype(dtype, jnp.integer):
        return ~x
    return ~_total_order(x)


# One key of these dtypes is ordered by one int32 as lax.sort orders it (JAX's comparator
# compares floats in totalOrder after making every NaN one NaN and -0.0 zero) or as lax.top_k
# does: windows are then sorted by integers, faster than by lax.sort's comparator of the keys
# (the general way, kept for several keys and for 64-bit ones).
_INT32_KEYED = frozenset(
    np.dtype(d)
    for d in ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32")
) | {np.dtype(jnp.bfloat16)}


def _int32_key(x, descending: bool):
    """x's order (lax.sort's, or lax.top_k's with `descending`) as int32."""
    dtype = np.dtype(x.dtype)
    if dtype == np.uint32:
        key = jax.lax.bitcast_convert_type(x, np.int32) ^ np.int32(np.iinfo(np.int32).min)
    elif dtype == np.bool_ or jnp.issubdtype(dtype, jnp.integer):
        key = x.astype(np.int32)
    else:
        if not descending:
            x = jnp.where(jnp.isnan(x), jnp.nan, jnp.where(x == 0, 0, x)).astype(dtype)
        key = _total_order(x).astype(np.int32)
    return ~key if descending else key


def _last(dtype):
    """A key no valid key sorts after (ties keep their order: the valid ones come first)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True
    if jnp.issubdtype(dtype, jnp.integer):
        return np.iinfo(dtype).max
    return np.nan


@dataclass(frozen=True)
class _Step:
    """What an in-memory step is compiled for; sizes and offsets are its arguments, so sorts of
    other shapes reuse it."""

    window: int
    dtypes: tuple  # of the windows read (the operands')
    num_keys: int
    descending: bool
    with_positions: bool

    @staticmethod
    def of(plan: _Plan, operands) -> _Step:
        return _Step(
            plan.window,
            plan.dtypes[: len(operands)],
            plan.num_keys,
            plan.descending,
            len(plan.dtypes) > len(operands),
        )

    @property
    def int32_keyed(self) -> bool:
        return self.num_keys == 1 and self.dtypes[0] in _INT32_KEYED


def _sort_keys(step: _Step, sources):
    """The keys a window's order is sorted by, computed on its source arrays."""
    if step.int32_keyed:
        return [_int32_key(sources[0], step.descending)]
    if step.descending:
        return [descending_key(k) for k in sources[: step.num_keys]]
    return list(sources[: step.num_keys])


def _order(step: _Step, sources, index, count):
    """`index` (positions in the sources) with its first `count` entries (the valid elements)
    sorted stably by their keys, the others after them: a sort of the keys and the index only
    (XLA's sort holds scratch per array it sorts), the sources gathered along it after."""
    invalid = jnp.arange(index.shape[0]) >= count
    # past the valid ones, the last key: equal keys keep their order, so valid ones first
    keys = [jnp.where(invalid, _last(k.dtype), k[index]) for k in _sort_keys(step, sources)]
    return jax.lax.sort((*keys, index), num_keys=len(keys), is_stable=True)[-1]


def _rotated(size: int, lo):
    """Indices of a window from `lo` on, wrapping around: its elements from `lo` first."""
    return ((jnp.arange(size) + lo) % size).astype(jnp.int32)


def _joined(len_a: int, lo_a, count_a, len_b: int, lo_b, count_b):
    """Indices into A then B (one array) of A's count_a elements from lo_a, then B's count_b from
    lo_b, then the others (junk)."""
    at = jnp.arange(len_a + len_b)
    in_b = len_a + (at - count_a + lo_b) % len_b
    return jnp.where(at < count_a, (at + lo_a) % len_a, in_b).astype(jnp.int32)


def _merge_windows(step: _Step, a, lo_a, count_a, b, lo_b, count_b, size: int):
    """The first `size` of the stable merge of A's count_a sorted elements from lo_a and B's
    count_b from lo_b (A's first of equal keys: they come first in the sort), and how many of
    them came from A and from B."""
    len_a = a[0].shape[0]
    sources = [jnp.concatenate([x, y]) for x, y in zip(a, b)]
    index = _joined(len_a, lo_a, count_a, b[0].shape[0], lo_b, count_b)
    order = _order(step, sources, index, count_a + count_b)[:size]
    taken = jnp.arange(size) < count_a + count_b
    n_a = jnp.sum(taken & (order < len_a), dtype=jnp.int32)
    return [x[order] for x in sources], n_a, jnp.sum(taken, dtype=jnp.int32) - n_a


def _window_start(start, row_start, count: int, total: int):
    """The position in its row of the first element of a window of `count` read at `start`
    (clamped, as the read is) of a flat array of `total` elements whose row begins at
    `row_start`."""
    return jnp.clip(start, 0, total - count) - row_start


def _block_of(windows, start, row_start, block_start, length, total, step: _Step):
    """A block of a row read as windows: the arrays (the positions too, where kept), where the
    block starts in them, and how many of their elements are in it."""
    W = step.window
    first = _window_start(start, row_start, W, total)
    carried = [jnp.asarray(w).astype(d) for w, d in zip(windows, step.dtypes)]
    if step.with_positions:
        carried.append((first + jnp.arange(W)).astype(INDEX_DTYPE))
    count = jnp.clip(jnp.minimum(length, block_start + W) - block_start, 0, W)
    return carried, block_start - first, count


@functools.cache
def _run_fn(step: _Step):
    """A block of W elements of a row, sorted (the elements past the row's end last)."""

    def sort_block(windows, start, row_start, block_start, length, total):
        carried, lo, count = _block_of(windows, start, row_start, block_start, length, total, step)
        order = _order(step, carried, _rotated(step.window, lo), count)
        return [c[order] for c in carried]

    return jax.jit(sort_block)


@functools.cache
def _merge_fn(step: _Step):
    """The next W elements of the merge of runs A and B (of `run` elements each in rows padded
    to whole windows; their valid elements end at the row's `length`), read as windows at
    A's i and B's j, and the new i and j."""
    W = step.window

    def merge_block(a, b, start_a, start_b, run_start, i, j, pair_start, run, length, total):
        def window(start, offset, done, valid):
            first = _window_start(start, run_start + offset, W, total)
            lo = done - first  # the window's first element not yet output
            return lo, jnp.clip(jnp.clip(valid - first, 0, W) - lo, 0, W)

        lo_a, count_a = window(start_a, 0, i, jnp.clip(length - pair_start, 0, run))
        lo_b, count_b = window(start_b, run, j, jnp.clip(length - pair_start - run, 0, run))
        merged, from_a, from_b = _merge_windows(step, a, lo_a, count_a, b, lo_b, count_b, W)
        return merged, i + from_a, j + from_b

    return jax.jit(merge_block)


@functools.cache
def _stream_fn(step: _Step, keep: int):
    """The best `keep` of a row so far (the first `count` of them valid) given the next block of
    W, sorted together (of equal keys, the earlier position stays)."""

    def best(candidates, count, windows, start, row_start, block_start, length, total):
        block, lo, in_block = _block_of(windows, start, row_start, block_start, length, total, step)
        merged, _, _ = _merge_windows(step, candidates, 0, count, block, lo, in_block, keep)
        return merged, jnp.minimum(count + in_block, keep)

    return jax.jit(best)


# -- the passes ------------------------------------------------------------------------------


def _merge_sort(io, plan: _Plan, operands):
    if plan.blocks == 1:  # each row is one window: sorted once, the first `keep` written
        return _runs(io, plan, operands, final=True)
    runs = _runs(io, plan, operands, final=False)
    # runs of W, 2W, ...: the pass from runs of W * 2**p is the last when they cover a row
    passes = math.ceil(math.log2(plan.blocks))

    def merge_pass(p, runs, state):
        merged = _merge_pass(io, plan, runs, plan.window * io.power_of_two(p), final=False)
        for dead in runs:
            io.release(dead, merged[0])
        return merged, state

    runs, _ = io.loop(passes - 1, merge_pass, runs, ())
    merged = _merge_pass(io, plan, runs, plan.window * 2 ** (passes - 1), final=True)
    for dead in runs:
        io.release(dead, merged[0])
    return merged


def _runs(io, plan: _Plan, operands, final: bool):
    W, n, blocks = plan.window, plan.length, plan.blocks
    out_len = plan.keep if final else blocks * W
    total = plan.rows * n
    sort_block = _run_fn(_Step.of(plan, operands))
    targets = [io.empty(d, plan.rows * out_len) for d in plan.dtypes]

    def row(b, targets, state):
        def block(t, targets, state):
            start = b * n + t * W
            windows = [io.read(x, start, W) for x in operands]
            carried = sort_block(windows, start, b * n, t * W, n, total)
            if final:
                carried = [c[: plan.keep] for c in carried]
            at = b * out_len + t * W
            return [io.put(x, at, c) for x, c in zip(targets, carried)], state

        return io.loop(blocks, block, targets, state)

    return io.loop(plan.rows, row, targets, ())[0]


def _merge_pass(io, plan: _Plan, runs, run: int, final: bool):
    W = plan.window
    padded = plan.blocks * W
    total = plan.rows * padded
    # the runs carry the positions already, as one more array sorted along
    merge_block = _merge_fn(_Step(W, plan.dtypes, plan.num_keys, plan.descending, False))
    out_len = plan.keep if final else padded
    per_pair = 2 * run // W
    targets = [io.empty(d, plan.rows * out_len) for d in plan.dtypes]

    def row(b, targets, state):
        row_start = b * padded

        def next_block(t, counts):
            i, j = counts
            pair = t // per_pair
            continuing = t - pair * per_pair != 0  # a pair starts with nothing output
            i, j = i * continuing, j * continuing
            run_start = row_start + pair * 2 * run
            a = [io.read(x, run_start + i, W) for x in runs]
            b_ = [io.read(x, run_start + run + j, W) for x in runs]
            out, i, j = merge_block(
                a,
                b_,
                run_start + i,
                run_start + run + j,
                run_start,
                i,
                j,
                pair * 2 * run,
                run,
                plan.length,
                total,
            )
            return out, (io.index(i), io.index(j))

        counts = (io.counter(), io.counter())
        targets, _ = write_row(io, targets, b * out_len, out_len, W, next_block, counts)
        return targets, state

    return io.loop(plan.rows, row, targets, ())[0]


def _best_of_stream(io, plan: _Plan, operands):
    W, n, keep = plan.window, plan.length, plan.keep
    total = plan.rows * n
    best = _stream_fn(_Step.of(plan, operands), keep)
    targets = [io.empty(d, plan.rows * keep) for d in plan.dtypes]
    none_yet = ([jnp.zeros(keep, d) for d in plan.dtypes], io.counter())

    def row(b, targets, state):
        def block(t, targets, so_far):
            start = b * n + t * W
            windows = [io.read(x, start, W) for x in operands]
            return targets, best(*so_far, windows, start, b * n, t * W, n, total)

        targets, (candidates, _) = io.loop(plan.blocks, block, targets, none_yet)
        return [io.put(x, b * keep, c) for x, c in zip(targets, candidates)], state

    return io.loop(plan.rows, row, targets, ())[0]
