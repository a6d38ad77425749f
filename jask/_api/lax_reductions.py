"""Rules for the jax.lax primitives that reduce, scan or sort (see jask/_jax/primitives.py: an op
that is one primitive declares it in its own file, as the cumulative reductions do; these rules
combine ops or read the primitive's params).

A rule takes the primitive's operands and params as `Primitive.bind` receives them and returns
what the primitive returns. jax.numpy has applied its dtype and rank promotion before it binds
a primitive, so a rule implements the primitive's own semantics, nothing of jnp's.
"""

from __future__ import annotations

import jax
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray
from .._jax.op import apply, describe
from .._jax.primitives import rule
from .._runtime import memory_budget
from ..ops.argreduce import ArgReduce, ArgReduceInMemory
from ..ops.cumulative import Cumlogsumexp, Cummax, Cummin, Cumprod, Cumsum
from ..ops.in_memory import FromInMemory
from ..ops.merge_sort import sort_rows
from ..ops.reshape import Reshape
from ..ops.sort import ArgsortRows, TakeAlongRows, from_last, to_last
from . import reductions
from .operands import in_memory_limit


def _reduction(reduction: str):
    def reduce(x, *, axes, out_sharding=None):
        return reductions.reduce_axes(x, tuple(int(a) for a in axes), reduction)

    reduce.__qualname__ = f"reduce_{reduction}"
    return reduce


for _reduction_name in ("sum", "max", "min", "prod"):
    rule(f"reduce_{_reduction_name}")(_reduction(_reduction_name))


def _logical(primitive: str, reduction: str):
    """reduce_and / reduce_or: min / max of booleans (integers would be bitwise)."""

    def reduce(x, *, axes, out_sharding=None):
        if np.dtype(x.dtype) != np.bool_:
            raise NotImplementedError(
                f"jax.lax.{primitive} of {describe(x)}: Jask reduces booleans only "
                f"(bitwise reductions of integers are not implemented)"
            )
        return reductions.reduce_axes(x, tuple(int(a) for a in axes), reduction)

    reduce.__qualname__ = primitive
    return reduce


rule("reduce_and")(_logical("reduce_and", "min"))
rule("reduce_or")(_logical("reduce_or", "max"))


# The engine's smallest streamed block (plan/planner.cpp kMinBlockElems), double-buffered.
_MIN_BLOCK = 64


def _carry_fits(primitive: str, x, axis: int, carry_bytes: int, block_bytes: int) -> None:
    """A scan along `axis` keeps a running value (`carry_bytes` each) per position of the axes
    after it, beside the smallest blocks streamed past them (`block_bytes` per element, two
    slots): they must fit the budget."""
    inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
    numel = int(np.prod(x.shape, dtype=np.int64))
    needed = inner * carry_bytes + 2 * min(numel, _MIN_BLOCK) * block_bytes
    if needed > memory_budget():
        raise NotImplementedError(
            f"jax.lax.{primitive} along axis {axis} of {describe(x)}: the running values of "
            f"one step along the axis ({inner} positions) and the smallest blocks need "
            f"{needed} bytes, more than the memory budget ({memory_budget()} bytes); raise the "
            f"budget (jask.set_memory_budget) or move the axis last"
        )


def _arg_reduction(reduction: str):
    def arg_reduce(x, *, axes, index_dtype):
        (axis,) = axes
        axis = int(axis)
        _carry_fits(f"arg{reduction}", x, axis, 12, np.dtype(x.dtype).itemsize + 8)
        out_size = int(np.prod(x.shape, dtype=np.int64)) // max(1, x.shape[axis])
        op = ArgReduceInMemory if out_size <= in_memory_limit() else ArgReduce
        index_dtype = np.dtype(index_dtype)
        if index_dtype == np.int32 or x.shape[axis] > np.iinfo(np.int32).max:
            return apply(op, x, axis=axis, reduction=reduction, index_dtype=index_dtype)
        # the engine counts positions in int32; jnp.argmax under x64 asks for int64
        found = apply(op, x, axis=axis, reduction=reduction, index_dtype=np.dtype(np.int32))
        return jax.lax.convert_element_type(found, index_dtype)

    arg_reduce.__qualname__ = f"arg{reduction}"
    return arg_reduce


rule("argmax")(_arg_reduction("max"))
rule("argmin")(_arg_reduction("min"))


def _cumulative(op):
    def cumulative(x, *, axis, reverse):
        axis = int(axis)
        _carry_fits(op.name, x, axis, 8, 2 * np.dtype(x.dtype).itemsize + 8)
        return apply(op, x, axis=axis, reverse=bool(reverse))

    cumulative.__qualname__ = op.name
    return cumulative


for _op in (Cumsum, Cumprod, Cummax, Cummin, Cumlogsumexp):
    rule(_op.name)(_cumulative(_op))


def _on_disk(x, like):
    """An operand of a sort as a DiskArray (jnp.argsort sorts an in-memory iota along)."""
    if isinstance(x, DiskArray):
        return x
    x = jax.numpy.broadcast_to(jax.numpy.asarray(x), like.shape)
    return apply(FromInMemory, x)


def _rows_fit(operands, axis: int, keep: int, n_keys: int) -> bool:
    """Whether the rows along `axis` that the engine's row sort holds fit the budget (two slots
    of each stream, as it plans them): finding the order (the keys' rows, as doubles too, and
    the positions), and, for the derivative, putting a row of each operand back in place.
    Longer rows take the merge sort."""
    n = operands[0].shape[axis]
    widest = max(np.dtype(o.dtype).itemsize for o in operands)
    keys = sum(np.dtype(o.dtype).itemsize for o in operands[:n_keys])
    order = 2 * (n * keys + keep * 4) + n * (8 * n_keys + 4)
    put_back = 2 * (keep * (widest + 4) + n * widest) + (n + keep) * 8
    return max(order, put_back) <= memory_budget()


def _flat_rows(x, axis: int):
    """x with `axis` last, as one flat array of its rows (in-memory operands stay in memory)."""
    if isinstance(x, DiskArray):
        moved = to_last(x, axis)
        return apply(Reshape, moved, shape=(moved.size,))
    return jax.numpy.moveaxis(jax.numpy.asarray(x), axis, -1).reshape(-1)


def _unflat_rows(x, shape, axis: int):
    """The inverse of `_flat_rows` for rows of shape[-1] (the moved shape)."""
    return from_last(apply(Reshape, x, shape=tuple(shape)), axis)


def _merge_sorted(operands, axis: int, num_keys: int, descending: bool, keep: int, positions):
    """Rows longer than the budget holds, sorted out of core (jask/ops/merge_sort.py)."""
    like = next(o for o in operands if isinstance(o, DiskArray))
    n = like.shape[axis]
    moved_shape = tuple(d for i, d in enumerate(like.shape) if i != axis) + (keep,)
    flat = [_flat_rows(o, axis) for o in operands]
    out = sort_rows(
        *flat,
        length=n,
        num_keys=num_keys,
        descending=descending,
        keep=keep,
        positions=positions,
    )
    return [_unflat_rows(o, moved_shape, axis) for o in out]


def _iota_along(x, axis: int) -> int:
    """1 where x counts 0, 1, 2, ... along `axis`, -1 where it counts down to 0 (jnp.argsort's
    positions under jit, reversed for a stable descending sort), 0 otherwise (or not known)."""
    made_by = None if isinstance(x, DiskArray) else compat.staged_equation(x)
    if made_by is None:
        return 0
    name, params, args = made_by
    if name == "iota" and int(params["dimension"]) == axis:
        return 1
    if name == "rev" and tuple(params["dimensions"]) == (axis,):
        return -_iota_along(args[0], axis)
    return 0


def _merge_sorted_along(operands, axis: int, num_keys: int):
    """The merge sort of the operands; an iota along the axis sorted along (jnp.argsort's, under
    jit) comes from the sort's own positions, and is never held in memory."""
    n = operands[0].shape[axis]
    iotas = {i: _iota_along(o, axis) for i, o in enumerate(operands) if i >= num_keys}
    iotas = {i: d for i, d in iotas.items() if d}
    kept = [o for i, o in enumerate(operands) if i not in iotas]
    out = _merge_sorted(kept, axis, num_keys, False, n, bool(iotas))
    results, positions = iter(out), out[-1]
    return [
        next(results)
        if i not in iotas
        else (positions if iotas[i] > 0 else (n - 1) - positions).astype(o.dtype)
        for i, o in enumerate(operands)
    ]


@rule("sort")
def sort(*operands, dimension, is_stable, num_keys):
    """Every operand in the order of the first `num_keys` (lexicographic), NaNs last; stable
    whatever `is_stable` says."""
    like = next(o for o in operands if isinstance(o, DiskArray))
    axis = int(dimension)
    n = like.shape[axis]
    if not _rows_fit(operands, axis, n, num_keys):
        return _merge_sorted_along(operands, axis, num_keys)
    operands = [_on_disk(o, like) for o in operands]
    moved = [to_last(o, axis) for o in operands]
    order = apply(ArgsortRows, *moved[:num_keys], descending=False, keep=n)
    return [from_last(apply(TakeAlongRows, o, order), axis) for o in moved]


@rule("top_k")
def top_k(x, *, k, axis=-1):
    """The k largest along `axis` (NaN largest), ties by lower index, and their int32 indices."""
    axis = int(axis) % len(x.shape)
    if not _rows_fit([x], axis, int(k), 1):
        return _merge_sorted([x], axis, 1, True, int(k), positions=True)
    moved = to_last(x, axis)
    order = apply(ArgsortRows, moved, descending=True, keep=int(k))
    return [from_last(apply(TakeAlongRows, moved, order), axis), from_last(order, axis)]
