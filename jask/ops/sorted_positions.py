"""Values at sorted positions of long rows, each the other's transpose: `ScatterSorted` places
them among zeros, `GatherSorted` takes them (the derivatives of lax.top_k of rows longer than
the memory budget holds: jask/ops/merge_sort.py).

Both take flat arrays: `positions` holds, for each of `rows` rows, `keep` distinct positions in
ascending order (of a row of `length`), and the values one per position. Both stream: a window
of W positions at a time (W from the memory budget), the rows of `length` a window at a time.
- ScatterSorted writes each block of W elements of a row from the positions inside it, which
  follow each other from the first not yet placed (at most W of them: they are distinct).
- GatherSorted fills each block of W positions by reading the row at the first position not yet
  filled, W elements, as often as that takes (positions ascend: each read fills at least one).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe
from ._block_io import io_for, write_row

INDEX_DTYPE = np.dtype(np.int32)


def window_for(itemsizes) -> int:
    """Elements per window when windows of arrays of these itemsizes (positions included) are
    read, an output block of the widest is made, and a scatter or gather joins them: half the
    budget for what XLA holds."""
    per = 4 * sum(itemsizes) + 4 * max(itemsizes) + 16
    return max(1, _runtime.memory_budget() // 2 // per)


def _check(name, positions, values, rows):
    if (
        len(positions.shape) != 1
        or len(values.shape) != 1
        or positions.dtype != INDEX_DTYPE
        or rows <= 0
        or positions.size % rows
    ):
        raise ValueError(
            f"jask.{name}: positions {describe(positions)} are not {rows} rows of int32 "
            f"positions for {describe(values)}"
        )


class ScatterSorted(Op):
    """Rows of `length` zeros with out[b, positions[b, e]] = values[b, e]."""

    name = "scatter_sorted"
    kernel = None  # no engine kernel: expand drives `rows`, `empty` and `put_block`
    linear = (1,)  # in the values; the positions are indices

    def out_type(self, positions, values, *, length, rows, window):
        _check(self.name, positions, values, rows)
        if values.size != positions.size:
            raise ValueError(
                f"jask.{self.name}: values {describe(values)} and positions "
                f"{describe(positions)} differ"
            )
        return DiskArrayTy((rows * length,), values.dtype)

    def transpose_rule(self, ct, positions, values):
        return apply(GatherSorted, positions, ct, length=self.length, window=self.window)

    def expand(self, positions, values):
        _runtime.ensure_scratch()
        io = io_for((positions, values))
        n, rows = self.length, self.rows
        keep = positions.size // rows
        W = min(self.window, n)
        read = min(self.window, positions.size)
        place = _place_fn(W, read, keep, positions.size, np.dtype(self.out_aval.dtype))
        out = io.empty(self.out_aval.dtype, rows * n)

        def row(b, targets, state):
            def next_block(t, placed):
                start = b * keep + placed
                at = io.read(positions, start, read)
                v = io.read(values, start, read)
                block, placed = place(at, v, start, b * keep, placed, t * W)
                return [block], io.index(placed)

            targets, _ = write_row(io, targets, b * n, n, W, next_block, io.counter())
            return targets, state

        return io.loop(rows, row, [out], ())[0][0]


class GatherSorted(Op):
    """out[b, e] = x[b, positions[b, e]], x of rows of `length`."""

    name = "gather_sorted"
    kernel = None  # no engine kernel: expand drives `rows`, `empty` and `put_block`
    linear = (1,)  # in x; the positions are indices

    def out_type(self, positions, x, *, length, window):
        rows = x.size // length if length else 0
        _check(self.name, positions, x, rows)
        if x.size != rows * length:
            raise ValueError(f"jask.{self.name}: {describe(x)} is not whole rows of {length}")
        return DiskArrayTy((positions.size,), x.dtype)

    def transpose_rule(self, ct, positions, x):
        rows = x.shape[0] // self.length
        return apply(
            ScatterSorted, positions, ct, length=self.length, rows=rows, window=self.window
        )

    def expand(self, positions, x):
        _runtime.ensure_scratch()
        io = io_for((positions, x))
        n = self.length
        rows = x.size // n
        keep = positions.size // rows
        out = io.empty(self.out_aval.dtype, positions.size)
        if keep == 0:
            return out
        W = min(self.window, keep)
        read = min(self.window, x.size)
        first_unfilled, fill = _gather_fns(read, x.size)

        def row(b, targets, state):
            def next_block(u, state):
                start = b * keep + u * W
                at = io.read(positions, start, W)
                filling = _gather_start(at, start, b * keep, u * W, keep, positions.size, x.dtype)

                def read_more(filling):
                    s = b * n + first_unfilled(at, filling[1])
                    return fill(at, io.read(x, s, read), s, b * n, *filling)

                filling = io.while_loop(lambda f: ~jnp.all(f[1]), read_more, filling)
                return [_in_order(filling[0], start, b * keep, u * W, positions.size)], state

            return write_row(io, targets, b * keep, keep, W, next_block, state)

        return io.loop(rows, row, [out], ())[0][0]


@functools.cache
def _place_fn(W: int, read: int, keep: int, total: int, dtype):
    """The block of W elements of a row from `block_start`, with the values whose positions fall
    in it (read from the first not yet placed), and the new count of values placed."""

    def place(positions, values, start, row_start, placed, block_start):
        first = jnp.clip(start, 0, total - read)
        entry = first - row_start + jnp.arange(read, dtype=jnp.int32)
        inside = (
            (entry >= placed)
            & (entry < keep)
            & (positions >= block_start)
            & (positions < block_start + W)
        )
        index = jnp.where(inside, positions - block_start, W)
        block = jnp.zeros(W, dtype).at[index].set(values.astype(dtype), mode="drop")
        return block, placed + jnp.sum(inside, dtype=jnp.int32)

    return jax.jit(place)


def _entries(start, row_start, count, total):
    first = jnp.clip(start, 0, total - count)
    return first - row_start + jnp.arange(count, dtype=jnp.int32)


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _gather_start(positions, start, row_start, block_start, keep, total, dtype):
    """No value yet; the entries of the window outside the block count as filled."""
    entry = _entries(start, row_start, positions.shape[0], total)
    wanted = (entry >= block_start) & (entry < jnp.minimum(keep, block_start + positions.shape[0]))
    return jnp.zeros(positions.shape[0], dtype), ~wanted


@functools.cache
def _gather_fns(read: int, x_total: int):
    def first_unfilled(positions, filled):
        return positions[jnp.argmin(filled)]

    def fill(positions, window, start, row_start, values, filled):
        first = jnp.clip(start, 0, x_total - read)
        offset = positions - (first - row_start)
        hit = ~filled & (offset >= 0) & (offset < read)
        taken = window[jnp.clip(offset, 0, read - 1)].astype(values.dtype)
        return jnp.where(hit, taken, values), filled | hit

    return jax.jit(first_unfilled), jax.jit(fill)


@functools.partial(jax.jit, static_argnums=(4,))
def _in_order(values, start, row_start, block_start, total):
    """The window's values from the block's first entry on (a read near the end is clamped)."""
    entry = _entries(start, row_start, values.shape[0], total)
    shift = block_start - entry[0]
    return values[jnp.clip(jnp.arange(values.shape[0]) + shift, 0, values.shape[0] - 1)]
