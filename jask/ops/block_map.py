"""A function XLA computes block by block along the leading axis of its operands, the engine
moving the blocks (the block route of jask/_api/xla_route.py).

`BlockMap(fn)` applies `fn`, a JAX function of in-memory arrays, to operands of which some are
*blocked* (a leading axis of one length n, DiskArrays or in-memory) and the others *whole*
(passed to every block as they are; DiskArrays among them are read into memory once). `fn`
must be independent along that axis: its value on rows [i, j) of the blocked operands is rows
[i, j) of its full result. Each result is either *rows* (a DiskArray of n rows, written block
by block) or a *sum* (an in-memory array, the sum over blocks of fn's value on each: what a
whole operand's cotangent is).

The loop reads each block through the engine's `rows` kernel (which reads the next rows
ahead), runs `fn` on it (one XLA compilation per block shape: two at most, the full blocks and
the last), and writes the rows results through `put_block` into arrays made by `empty`.
Eagerly it is a Python loop; inside a jitted program, a `fori_loop` of the program itself.

Derivatives are BlockMaps of fn's own: the cotangents of the blocked operands are rows of
`jax.vjp(fn)` given the results' cotangents block by block, those of whole operands sums over
blocks; tangents are rows of `jax.jvp(fn)`. So every order of differentiation streams.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._dtypes import dtype_code, storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply, is_traced
from .in_memory import FromInMemory, ToInMemory
from .rows import Rows

ROWS, SUM = "rows", "sum"


class BlockFn:
    """A JAX function of in-memory arrays, the kinds of its results (ROWS or SUM), and its
    derived functions (made once, so each compiles once). Compared by identity."""

    def __init__(self, fn, kinds: tuple[str, ...], name: str):
        self.fn, self.kinds, self.name = fn, tuple(kinds), name
        self._derived: dict = {}
        self.jitted = jax.jit(fn)

    def derived(self, key, make):
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    def __repr__(self):
        return self.name


def _block_struct(aval, blocked: bool, count: int):
    shape = (count, *aval.shape[1:]) if blocked else aval.shape
    return jax.ShapeDtypeStruct(shape, jax.dtypes.canonicalize_dtype(aval.dtype))


class BlockMap(Op):
    name = "block_map"
    kernel = None  # no engine kernel of its own: expand drives `rows`, `empty` and `put_block`
    result = "arrays"

    def out_type(self, *operands, fn, blocked, block):
        n = self._length(operands, blocked)
        outs = jax.eval_shape(fn.fn, *(_block_struct(a, b, 1) for a, b in zip(operands, blocked)))
        types = []
        for aval, kind in zip(outs, fn.kinds):
            if kind == ROWS:
                types.append(DiskArrayTy((n, *aval.shape[1:]), storage_dtype(aval.dtype)))
            else:
                types.append(compat.ShapedArray(aval.shape, aval.dtype))
        return tuple(types)

    @staticmethod
    def _length(operands, blocked) -> int:
        lengths = {a.shape[0] for a, b in zip(operands, blocked) if b}
        if len(lengths) != 1:
            raise ValueError(f"jask.block_map: blocked operands of leading lengths {lengths}")
        return lengths.pop()

    def _blocks(self):
        """(number of full blocks, rows of the last, shorter one: 0 for none)."""
        return divmod(self._length(self.in_avals, self.blocked), self.block)

    # -- evaluation -------------------------------------------------------------
    def expand(self, *operands):
        _runtime.ensure_scratch()
        whole = [
            apply(ToInMemory, x) if isinstance(x, DiskArray) and not b else x
            for x, b in zip(operands, self.blocked)
        ]
        if compat.is_eager() and not any(is_traced(x) for x in operands):
            return self._run_eagerly(whole)
        return self._run_lowered(whole)

    def _run_eagerly(self, operands):
        full, rest = self._blocks()
        results = [
            Empty(dtype=a.dtype, shape=a.shape)._run_eagerly(())
            if isinstance(a, DiskArrayTy)
            else None
            for a in self.out_aval
        ]
        sums = [
            None if r is not None else jnp.zeros(a.shape, a.dtype)
            for a, r in zip(self.out_aval, results)
        ]
        for start, count in [(i * self.block, self.block) for i in range(full)] + (
            [(full * self.block, rest)] if rest else []
        ):
            blocks = [
                self._read_eagerly(x, start, count) if b else x
                for x, b in zip(operands, self.blocked)
            ]
            values = self.fn.jitted(*blocks)
            for i, (target, value) in enumerate(zip(results, values)):
                if target is None:
                    sums[i] = sums[i] + value
                else:
                    block = jnp.asarray(value, target.dtype)
                    put_block(target, block)._run_eagerly((target, np.int32(start), block))
        return tuple(r if r is not None else s for r, s in zip(results, sums))

    @staticmethod
    def _read_eagerly(x, start, count):
        if not isinstance(x, DiskArray):
            return jax.lax.dynamic_slice_in_dim(x, start, count, 0)
        return rows_reader(x.aval, count)._run_eagerly((x, np.int32(start)))

    def _run_lowered(self, operands):
        full, rest = self._blocks()
        # the loop carries the targets' int32 handles (a DiskArray is no loop carry here)
        targets = [
            Empty(dtype=a.dtype, shape=a.shape)._lower(())._lowered_handle()
            if isinstance(a, DiskArrayTy)
            else None
            for a in self.out_aval
        ]
        sums = [
            None if t is not None else jnp.zeros(a.shape, a.dtype)
            for a, t in zip(self.out_aval, targets)
        ]

        def step(start, count, carry):
            targets, sums = carry
            blocks = [
                self._read_lowered(x, start, count) if b else x
                for x, b in zip(operands, self.blocked)
            ]
            values = self.fn.fn(*blocks)
            new_targets, new_sums = [], []
            for t, s, value, aval in zip(targets, sums, values, self.out_aval):
                if t is None:
                    new_targets.append(None)
                    new_sums.append(s + value)
                else:
                    block, target = value.astype(aval.dtype), DiskArray(aval, t)
                    start_ = jnp.asarray(start, jnp.int32)
                    written = put_block(target, block)._lower((target, start_, block))
                    new_targets.append(written._lowered_handle())
                    new_sums.append(None)
            return new_targets, new_sums

        carry = (targets, sums)
        if full:
            carry = jax.lax.fori_loop(
                0, full, lambda i, c: step(i * self.block, self.block, c), carry
            )
        if rest:
            carry = step(jnp.int32(full * self.block), rest, carry)
        targets, sums = carry
        return tuple(
            DiskArray(aval, t) if t is not None else s
            for aval, t, s in zip(self.out_aval, targets, sums)
        )

    @staticmethod
    def _read_lowered(x, start, count):
        if not isinstance(x, DiskArray):
            return jax.lax.dynamic_slice_in_dim(x, start, count, 0)
        return rows_reader(x.aval, count)._lower((x, jnp.asarray(start, jnp.int32)))

    # -- derivatives ----------------------------------------------------------------
    def vjp(self, ct, *operands, out, needs):
        cts = ct if isinstance(ct, (tuple, list)) else (ct,)
        present = tuple(not isinstance(c, compat.Zero) and c is not None for c in cts)
        wanted = tuple(bool(n) for n in needs)
        if not any(present) or not any(wanted):
            return (None,) * len(operands)
        fn = self.fn.derived(("vjp", present, wanted), lambda: _vjp_fn(self, present, wanted))
        given = [c for c, p in zip(cts, present) if p]
        given = [
            _as_operand(c, aval)
            for c, aval in zip(given, [a for a, p in zip(self.out_aval, present) if p])
        ]
        blocked = self.blocked + tuple(
            isinstance(a, DiskArrayTy) for a, p in zip(self.out_aval, present) if p
        )
        results = iter(apply(BlockMap, *operands, *given, fn=fn, blocked=blocked, block=self.block))
        out_cts = []
        for aval, w in zip(self.in_avals, wanted):
            if not w:
                out_cts.append(None)
                continue
            c = next(results)
            if isinstance(aval, DiskArrayTy) and not isinstance(c, DiskArray):
                c = apply(FromInMemory, c.astype(aval.dtype))  # a whole DiskArray's cotangent
            elif not isinstance(aval, DiskArrayTy) and isinstance(c, DiskArray):
                c = apply(ToInMemory, c)  # a blocked in-memory operand's
            out_cts.append(c)
        return tuple(out_cts)

    def tangent(self, out, operands, tangents):
        present = tuple(t is not None for t in tangents)
        if not any(present):
            return None
        fn = self.fn.derived(("jvp", present), lambda: _jvp_fn(self, present))
        given = [t for t in tangents if t is not None]
        blocked = self.blocked + tuple(b for b, p in zip(self.blocked, present) if p)
        return apply(BlockMap, *operands, *given, fn=fn, blocked=blocked, block=self.block)

    def __repr__(self):
        return f"jask.block_map[{self.fn!r}, block={self.block}]"


class Empty(Op):
    """A new scratch array that a BlockMap writes whole, block by block (its file may be a
    recycled one: no byte is read before it is written)."""

    name = "empty"
    kernel = "empty"

    def out_type(self, *, dtype, shape):
        return DiskArrayTy(tuple(shape), storage_dtype(dtype))

    def kernel_params(self):
        return {"dtype": dtype_code(self.dtype), "shape": tuple(self.shape)}


class PutBlock(Op):
    """Rows [start, start + len(block)) of an `Empty` array written in place; the result is the
    same array (its handle), so every later read of it depends on the write."""

    name = "put_block"
    kernel = "put_block"
    zero_derivative = True  # a write inside BlockMap's expansion, never differentiated

    def out_type(self, target, start, block):
        return target


def put_block(target, block) -> PutBlock:
    """The engine's writer of `block` into `target` at a start row."""
    int32 = compat.ShapedArray((), np.dtype(np.int32))
    return PutBlock(target.aval, int32, compat.ShapedArray(block.shape, block.dtype))


def rows_reader(aval, count) -> Rows:
    """The engine's reader of `count` rows of an array of type `aval` from a start row (called
    through its eager or lowered path: BlockMap's expansion is already inside a bind)."""
    return Rows(aval, compat.ShapedArray((), np.dtype(np.int32)), count=count)


def _as_operand(c, aval):
    """A result's cotangent as the derived map takes it: ROWS ones on disk, SUM ones in memory."""
    if isinstance(aval, DiskArrayTy):
        return c if isinstance(c, DiskArray) else apply(FromInMemory, c)
    return apply(ToInMemory, c) if isinstance(c, DiskArray) else c


def _vjp_fn(op: BlockMap, present, wanted) -> BlockFn:
    n_in = len(op.in_avals)
    kinds = tuple(ROWS if b else SUM for b, w in zip(op.blocked, wanted) if w)

    def fn(*args):
        primals, given = args[:n_in], iter(args[n_in:])

        def of_wanted(*xs):  # the function of the operands whose cotangents are wanted only
            full, it = list(primals), iter(xs)
            for i, w in enumerate(wanted):
                if w:
                    full[i] = next(it)
            return op.fn.fn(*full)

        outs, pullback = jax.vjp(of_wanted, *(p for p, w in zip(primals, wanted) if w))
        cts = [
            next(given).astype(o.dtype) if p else _zero_tangent(o) for o, p in zip(outs, present)
        ]
        return tuple(pullback(tuple(cts)))

    return BlockFn(fn, kinds, f"vjp({op.fn.name})")


def _zero_tangent(x):
    """A zero tangent (or cotangent) of x: float0 for integers and bools, as JAX wants."""
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros(x.shape, x.dtype)
    return np.zeros(x.shape, jax.dtypes.float0)


def _jvp_fn(op: BlockMap, present) -> BlockFn:
    n_in = len(op.in_avals)

    def fn(*args):
        primals, given = args[:n_in], iter(args[n_in:])

        def of_present(*xs):  # the function of the operands with tangents only
            full, it = list(primals), iter(xs)
            for i, q in enumerate(present):
                if q:
                    full[i] = next(it)
            return op.fn.fn(*full)

        moving = [p for p, q in zip(primals, present) if q]
        tangents = [next(given).astype(p.dtype) for p in moving]
        _, t_out = jax.jvp(of_present, tuple(moving), tuple(tangents))
        return tuple(t_out)

    return BlockFn(fn, op.fn.kinds, f"jvp({op.fn.name})")
