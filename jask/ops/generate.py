"""New DiskArrays whose rows XLA computes block by block from the rows' positions (the arrays
`jask.on_disk` makes: random bits, iotas, broadcasts and elementwise functions of them).

`GenerateRows(fn, rows, blocked, block)` makes arrays of `rows` rows. `fn(start, count,
*operands)` is a JAX function of in-memory arrays (`count` static) that returns rows
[start, start + count) of every result; each operand is *blocked* (given as its rows
[start, start + count): a DiskArray of `rows` rows read through the engine's `rows` kernel, or
an in-memory array) or *whole* (given to every block as it is: a key, a scalar). Unlike
`jask.ops.block_map.BlockMap`, a block may depend on where it is (a counter-based random
number is a function of its flat position), and an array may have no operand of its length.

The results are `empty` arrays written by `put_block`, block by block; eagerly a Python loop,
inside a jitted program a `fori_loop` of the program itself. Every block has `block` rows, so
`fn` compiles once: the last block ends at the last row, writing again rows of the one before.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._dtypes import storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op
from .block_map import Empty, is_traced, put_block, rows_reader


class RowsFn:
    """`fn(start, count, *operands) -> tuple of row blocks` with the types of its full results;
    `eager(start, count, *operands)` computes the same blocks outside a jitted program (default:
    `fn` jitted, `count` static; it may run `fn` as several compiled parts). Made once per
    structure, so each part compiles once per block shape. Compared by identity."""

    def __init__(
        self, fn, outs: tuple[tuple[tuple[int, ...], np.dtype], ...], name: str, eager=None
    ):
        self.fn, self.outs, self.name = fn, tuple(outs), name
        self.eager = eager if eager is not None else jax.jit(fn, static_argnums=(1,))

    def __repr__(self):
        return self.name


class GenerateRows(Op):
    name = "generate_rows"
    kernel = None  # no engine kernel of its own: expand drives `empty`, `rows` and `put_block`
    result = "arrays"

    def out_type(self, *operands, fn, rows, blocked, block):
        if not 1 <= block <= rows:
            raise ValueError(f"jask.on_disk: blocks of {block} rows of an array of {rows}")
        for aval, b in zip(operands, blocked):
            if b and (not aval.shape or aval.shape[0] != rows):
                raise ValueError(
                    f"jask.on_disk: a blocked operand of shape {aval.shape} is not {rows} rows"
                )
        return tuple(DiskArrayTy(shape, storage_dtype(dtype)) for shape, dtype in fn.outs)

    def _starts(self) -> list[int]:
        """Where each block starts: every block is `block` rows (one compilation), the last
        one ending at the last row (it may write again rows the one before wrote: the same
        values, as a row is a function of its position)."""
        starts = list(range(0, self.rows - self.block + 1, self.block))
        return starts + ([self.rows - self.block] if self.rows % self.block else [])

    # -- evaluation -------------------------------------------------------------
    def expand(self, *operands):
        _runtime.ensure_scratch()
        if compat.is_eager() and not any(is_traced(x) for x in operands):
            return self._run_eagerly(operands)
        return self._run_lowered(operands)

    def _run_eagerly(self, operands):
        targets = [Empty(dtype=a.dtype, shape=a.shape)._run_eagerly(()) for a in self.out_aval]
        for start in self._starts():
            blocks = [
                _read_eagerly(x, start, self.block) if b else x
                for x, b in zip(operands, self.blocked)
            ]
            values = self.fn.eager(np.int32(start), self.block, *blocks)
            for target, value in zip(targets, values):
                block = jnp.asarray(value, target.dtype)
                put_block(target, block)._run_eagerly((target, np.int32(start), block))
        return tuple(targets)

    def _run_lowered(self, operands):
        full = self.rows // self.block
        # the loop carries the targets' int32 handles (a DiskArray is no loop carry here)
        targets = [
            Empty(dtype=a.dtype, shape=a.shape)._lower(())._lowered_handle() for a in self.out_aval
        ]

        def step(start, targets):
            start = jnp.asarray(start, jnp.int32)
            blocks = [
                _read_lowered(x, start, self.block) if b else x
                for x, b in zip(operands, self.blocked)
            ]
            values = self.fn.fn(start, self.block, *blocks)
            written = []
            for t, value, aval in zip(targets, values, self.out_aval):
                block, target = value.astype(aval.dtype), DiskArray(aval, t)
                done = put_block(target, block)._lower((target, start, block))
                written.append(done._lowered_handle())
            return written

        targets = jax.lax.fori_loop(0, full, lambda i, t: step(i * self.block, t), targets)
        if self.rows % self.block:
            targets = step(self.rows - self.block, targets)
        return tuple(DiskArray(aval, t) for aval, t in zip(self.out_aval, targets))

    # -- derivatives ----------------------------------------------------------------
    def vjp(self, ct, *operands, out, needs):
        if any(needs):
            raise NotImplementedError(
                "jax.grad through jask.on_disk's generated arrays needs a backward rule, which "
                "jask.on_disk does not have; differentiate the function on in-memory arrays"
            )
        return (None,) * len(operands)

    def tangent(self, out, operands, tangents):
        if any(t is not None for t in tangents):
            raise NotImplementedError(
                "jax.jvp through jask.on_disk's generated arrays needs a forward rule, which "
                "jask.on_disk does not have; differentiate the function on in-memory arrays"
            )
        return None

    def __repr__(self):
        return f"jask.generate_rows[{self.fn!r}, rows={self.rows}, block={self.block}]"


def _read_eagerly(x, start, count):
    if not isinstance(x, DiskArray):
        return jax.lax.dynamic_slice_in_dim(x, start, count, 0)
    return rows_reader(x.aval, count)._run_eagerly((x, np.int32(start)))


def _read_lowered(x, start, count):
    if not isinstance(x, DiskArray):
        return jax.lax.dynamic_slice_in_dim(x, start, count, 0)
    return rows_reader(x.aval, count)._lower((x, start))
