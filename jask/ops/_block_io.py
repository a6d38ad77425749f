"""The moves of an algorithm that streams windows of flat arrays through XLA (jask/ops/merge_sort.py,
jask/ops/sorted_positions.py), written once for both ways an op runs.

An algorithm states what it does with the moves `EagerIO` and `LoweredIO` both have: read
`count` elements of a flat array from a start (clamped, as lax.dynamic_slice clamps, so the read
stays inside the array), make a new scratch array, write a block into it at a start, loop, and
compute on windows in memory.
`EagerIO` runs it now: Python loops, the engine called directly, each compute function jitted
(compiled once per shape). `LoweredIO` stages it into the jitted program being lowered: loops
are `fori_loop` / `while_loop` of the program, reads and writes the engine's FFI calls (the
same `rows`, `empty` and `put_block` kernels as jask/ops/block_map.py), and scratch arrays
an algorithm no longer needs are released after their last reader (in an eager run Python
frees them).

Loop carries are DiskArrays (the arrays being written) and in-memory values; inside a lowered
loop a DiskArray travels as its int32 handle.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray
from .block_map import Empty, put_block, rows_reader
from .release import Release


def _read_in_memory(x, start, count):
    return jax.lax.dynamic_slice_in_dim(x, start, count, 0)


def io_for(operands) -> EagerIO | LoweredIO:
    """Eager when JAX evaluates now and no operand is traced; lowered otherwise (constants inside
    a lowering go into the program: the op runs when the program runs)."""
    traced = any(compat.is_tracer(x._handle if isinstance(x, DiskArray) else x) for x in operands)
    return EagerIO() if compat.is_eager() and not traced else LoweredIO()


class EagerIO:
    """Runs now: starts and counters are Python ints."""

    def read(self, x, start, count: int):
        if isinstance(x, DiskArray):
            return rows_reader(x.aval, count)._run_eagerly((x, np.int32(start)))
        return _read_in_memory(x, int(start), count)

    def empty(self, dtype, size: int) -> DiskArray:
        return Empty(dtype=np.dtype(dtype), shape=(size,))._run_eagerly(())

    def put(self, target: DiskArray, start, block) -> DiskArray:
        if block.dtype != target.dtype:
            block = block.astype(target.dtype)
        put_block(target, block)._run_eagerly((target, np.int32(start), block))
        return target

    def loop(self, count: int, body, targets, state):
        """`body(t, targets, state) -> (targets, state)` for t in range(count)."""
        for t in range(count):
            targets, state = body(t, targets, state)
        return targets, state

    def while_loop(self, cond, body, state):
        while bool(cond(state)):
            state = body(state)
        return state

    def counter(self) -> int:
        return 0

    def power_of_two(self, p: int) -> int:
        return 1 << p

    def index(self, value) -> int:
        """A counter computed in memory, as the next start is computed from it."""
        return int(value)

    def choose(self, condition, if_true, if_false):
        """`if_true()` or `if_false()`: the one the condition picks."""
        return if_true() if condition else if_false()

    def release(self, dead: DiskArray, after) -> None:
        """Python frees a scratch array with its last reference."""


class LoweredIO:
    """Stages the moves into the program being lowered: starts and counters are traced int32."""

    def read(self, x, start, count: int):
        start = jnp.asarray(start, jnp.int32)
        if isinstance(x, DiskArray):
            return rows_reader(x.aval, count)._lower((x, start))
        return _read_in_memory(x, start, count)

    def empty(self, dtype, size: int) -> DiskArray:
        return Empty(dtype=np.dtype(dtype), shape=(size,))._lower(())

    def put(self, target: DiskArray, start, block) -> DiskArray:
        block = jnp.asarray(block, target.dtype)
        start = jnp.asarray(start, jnp.int32)
        return put_block(target, block)._lower((target, start, block))

    def loop(self, count: int, body, targets, state):
        if count == 0:
            return targets, state
        if count == 1:
            return body(jnp.int32(0), targets, state)
        avals = [t.aval for t in targets]

        def step(t, carry):
            handles, state = carry
            arrays = [DiskArray(a, h) for a, h in zip(avals, handles)]
            arrays, state = body(t, arrays, state)
            return [a._lowered_handle() for a in arrays], state

        handles = [t._lowered_handle() for t in targets]
        handles, state = jax.lax.fori_loop(0, count, step, (handles, state))
        return [DiskArray(a, h) for a, h in zip(avals, handles)], state

    def while_loop(self, cond, body, state):
        return jax.lax.while_loop(cond, body, state)

    def counter(self):
        return jnp.int32(0)

    def power_of_two(self, p):
        return jnp.left_shift(jnp.int32(1), p)

    def index(self, value):
        return value

    def choose(self, condition, if_true, if_false):
        """Both computed, one kept (elementwise)."""
        return jax.tree.map(lambda a, b: jnp.where(condition, a, b), if_true(), if_false())

    def release(self, dead: DiskArray, after: DiskArray) -> None:
        """Frees `dead` once `after` exists (every read of `dead` went into it)."""
        Release(dead.aval, after.aval).expand(dead, after)


def write_row(io, targets, row_start, size: int, W: int, make, state):
    """Writes elements [row_start, row_start + size) of each target, W at a time, from
    `make(t, state) -> (blocks, state)` called for t = 0, 1, ... in order (`size` >= W). A last,
    partial block goes in as the row's last W elements (the end of the block before it, then its
    own start): every write is W long, so a lowered loop has one body."""
    full, tail = divmod(size, W)
    if not tail:

        def whole(t, targets, state):
            blocks, state = make(t, state)
            return [io.put(x, row_start + t * W, b) for x, b in zip(targets, blocks)], state

        return io.loop(full, whole, targets, state)

    def shifted(t, targets, carry):
        state, before = carry
        blocks, state = make(t, state)
        last = t == full
        out = io.choose(
            last,
            lambda: [jnp.concatenate([p, b])[tail : tail + W] for p, b in zip(before, blocks)],
            lambda: blocks,
        )
        at = row_start + io.choose(last, lambda: size - W, lambda: t * W)
        return [io.put(x, at, b) for x, b in zip(targets, out)], (state, blocks)

    before = [jnp.zeros(W, x.dtype) for x in targets]
    targets, (state, _) = io.loop(full + 1, shifted, targets, (state, before))
    return targets, state
