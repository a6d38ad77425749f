"""jax.vmap of Jask ops without unrolling: the trace of a batch of n holds the same ops as
that of a batch of 1.

Jask ops are passes over whole arrays, so most have a batched form that is the same op on
the whole batch: the batched operands get their batch axis first (a transpose where it is
elsewhere) and, for ops that broadcast, size-1 axes up to the result's rank; the unbatched
ones broadcast against them as NumPy broadcasts (elementwise ops, matmul), or get the batch
axis written out (the operands of a concatenate or of a row sort, which must agree). Ops
with axes shift them by one (reductions over axes, cumulative ops, transposes, slices).

An op with no batched form (row reads and writes at traced offsets, a take from a batched
array) runs in a loop over the batch (`jax.lax.fori_loop`): one body in the trace, each
iteration slicing its element out of the batched operands and writing its results into
the stacked outputs (DiskArrays for DiskArray results). Each write makes a new stacked
DiskArray, so the loop's I/O grows as the batch squared: it is for the ops vmap rarely meets.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import apply
from ._elementwise import Elementwise
from .argreduce import ArgReduce
from .concatenate import Concatenate
from .cumulative import Cumulative
from .dynamic_slice import DynamicSlice, DynamicUpdateSlice
from .in_memory import FromInMemory, ToInMemory
from .matmul import Matmul
from .mul import Mul
from .pad import Pad
from .reduce import BroadcastTo, Fill, Reduce, ReduceAxes, ReduceAxesInMemory, filled
from .reshape import Reshape
from .slice import Place, Slice
from .sort import ArgsortRows, PutAlongRows, TakeAlongRows
from .stop_gradient import StopGradient
from .take import Take
from .transpose import Transpose


def batch(op, size: int, args, dims):
    """(results batched along axis 0, their batch axes) of `op` over a batch of `size`."""
    if size == 0:
        raise NotImplementedError(
            f"jax.vmap of jask.{op.name} over an empty batch axis is not supported"
        )
    for kind, rule in _RULES:
        if isinstance(op, kind):
            out = rule(op, size, args, dims)
            if out is not None:
                return out, (0,) * len(out) if isinstance(out, tuple) else 0
    return _loop(op, size, args, dims), (0,) * len(op.out_aval) if _multiple(op) else 0


# -- operands --------------------------------------------------------------------------


def _front(x, d):
    """x with its batch axis `d` moved first."""
    if d == 0:
        return x
    perm = (d, *(a for a in range(np.ndim(x)) if a != d))
    if isinstance(x, DiskArray):
        return apply(Transpose, x, perm=perm)
    return jnp.transpose(x, perm)


def _reshape(x, shape):
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return apply(Reshape, x, shape=shape) if isinstance(x, DiskArray) else jnp.reshape(x, shape)


def _batched(x, d, rank: int):
    """A batched operand with its batch axis first and size-1 axes after it, so that its
    element's shape broadcasts against an element of `rank` axes as NumPy aligns them."""
    x = _front(x, d)
    pad = rank - (np.ndim(x) - 1)
    return _reshape(x, (x.shape[0], *(1,) * pad, *x.shape[1:])) if pad > 0 else x


def _written_out(x, d, size: int):
    """An operand with its batch axis first, the batch written out where x has none."""
    if d is not None:
        return _front(x, d)
    shape = (size, *np.shape(x))
    if isinstance(x, DiskArray):
        return apply(BroadcastTo, x, shape=shape)
    return jnp.broadcast_to(x, shape)


def _rank(aval) -> int:
    return len(aval.shape)


# -- batched forms ---------------------------------------------------------------------


def _broadcasting(op, size, args, dims):
    """Elementwise ops and matmul: the unbatched operands broadcast against the batch."""
    rank = _rank(op.out_aval)
    operands = [x if d is None else _batched(x, d, rank) for x, d in zip(args, dims)]
    params = dict(op.params)
    if isinstance(op, BroadcastTo):
        params["shape"] = (size, *op.params["shape"])
    return apply(type(op), *operands, **params)


def _same_op(op, size, args, dims):
    """Ops of one operand that treat all its axes alike (to memory, from memory)."""
    (x,), (d,) = args, dims
    return apply(type(op), _front(x, d), **op.params)


def _shifted_axis(op, size, args, dims):
    """Ops along one axis of one operand (cumulative ops, argmax): that axis plus one."""
    (x,), (d,) = args, dims
    return apply(type(op), _front(x, d), **{**op.params, "axis": op.params["axis"] + 1})


def _reduce_axes(op, size, args, dims):
    (x,), (d,) = args, dims
    axes = tuple(a + 1 for a in op.params["axes"])
    return apply(type(op), _front(x, d), axes=axes, reduction=op.params["reduction"])


def _reduce(op, size, args, dims):
    """A full reduction: a reduction over every axis but the batch's, into memory."""
    instr, reduction = op.params["instr"], op.params["reduction"]
    if instr == "copy":
        (x,), (d,) = args, dims
        x = _front(x, d)
    elif instr == "mul":
        rank = max(_rank(a) for a in op.in_avals)
        a, b = (x if d is None else _batched(x, d, rank) for x, d in zip(args, dims))
        x = apply(Mul, a, b)
        if not isinstance(x, DiskArray):
            return None
    else:
        return None
    if x.ndim == 1:
        return apply(ToInMemory, x)
    return apply(ReduceAxesInMemory, x, axes=tuple(range(1, x.ndim)), reduction=reduction)


def _transpose(op, size, args, dims):
    (x,), (d,) = args, dims
    return apply(Transpose, _front(x, d), perm=(0, *(p + 1 for p in op.params["perm"])))


def _reshape_op(op, size, args, dims):
    (x,), (d,) = args, dims
    return apply(Reshape, _front(x, d), shape=(size, *op.params["shape"]))


def _slice(op, size, args, dims):
    (x,), (d,) = args, dims
    selection = ((0, 1, size), *op.params["selection"])
    return apply(type(op), _front(x, d), selection=selection)


def _place(op, size, args, dims):
    (x,), (d,) = args, dims
    p = op.params
    selection = ((0, 1, size), *p["selection"])
    return apply(
        Place, _front(x, d), shape=(size, *p["shape"]), dtype=p["dtype"], selection=selection
    )


def _pad(op, size, args, dims):
    (x, value), (d, value_dim) = args, dims
    if value_dim is not None:
        return None
    p = op.params
    selection = ((0, 1, size), *p["selection"])
    return apply(Pad, _front(x, d), value, shape=(size, *p["shape"]), selection=selection)


def _fill(op, size, args, dims):
    (value,), (d,) = args, dims
    shape, dtype = op.params["shape"], op.params["dtype"]
    value = jnp.reshape(jnp.asarray(_front(value, d)).astype(dtype), (size, *(1,) * len(shape)))
    return apply(BroadcastTo, value, shape=(size, *shape))


def _concatenate(op, size, args, dims):
    parts = [_written_out(x, d, size) for x, d in zip(args, dims)]
    return apply(Concatenate, *parts, axis=op.params["axis"] + 1)


def _rows(op, size, args, dims):
    """Ops along the last axis of operands of one leading shape (sorts): all batched."""
    return apply(type(op), *(_written_out(x, d, size) for x, d in zip(args, dims)), **op.params)


def _take(op, size, args, dims):
    """Rows of an unbatched array at batched indices: the rows of the whole batch of indices."""
    (x, indices), (x_dim, i_dim) = args, dims
    if x_dim is not None:
        return None
    return apply(type(op), x, _front(indices, i_dim), **op.params)


# The first kind an op is an instance of gives its rule (subclasses before their bases); a
# rule returning None leaves the op to the loop.
_RULES = (
    (BroadcastTo, _broadcasting),
    (Elementwise, _broadcasting),
    (Matmul, _broadcasting),
    (ToInMemory, _same_op),
    (FromInMemory, _same_op),
    (StopGradient, _same_op),
    (Cumulative, _shifted_axis),
    (ArgReduce, _shifted_axis),
    (ReduceAxes, _reduce_axes),
    (Reduce, _reduce),
    (Transpose, _transpose),
    (Reshape, _reshape_op),
    (Slice, _slice),
    (Place, _place),
    (Pad, _pad),
    (Fill, _fill),
    (Concatenate, _concatenate),
    (ArgsortRows, _rows),
    (TakeAlongRows, _rows),
    (PutAlongRows, _rows),
    (Take, _take),
)


# -- the loop over the batch -----------------------------------------------------------


def _multiple(op) -> bool:
    return isinstance(op.out_aval, tuple)


def _loop(op, size, args, dims):
    """`op` once per element in a fori_loop: one body in the trace for any batch size."""
    out_avals = op.out_aval if _multiple(op) else (op.out_aval,)
    stacked = tuple(_zeros((size, *a.shape), a) for a in out_avals)

    def body(i, stacked):
        element = [x if d is None else _element(x, d, i) for x, d in zip(args, dims)]
        results = op(*element)
        results = results if _multiple(op) else (results,)
        return tuple(_put(s, r, i) for s, r in zip(stacked, results))

    stacked = jax.lax.fori_loop(0, size, body, stacked)
    return stacked if _multiple(op) else stacked[0]


def _zeros(shape, aval):
    if isinstance(aval, DiskArrayTy):  # (filled: a complex zero is no double scalar)
        return filled(np.zeros((), aval.dtype), shape, aval.dtype)
    return jnp.zeros(shape, aval.dtype)


def _element(x, axis: int, i):
    """Element i of x along its batch axis."""
    if not isinstance(x, DiskArray):
        return jax.lax.dynamic_index_in_dim(x, i, axis, keepdims=False)
    starts = [i if a == axis else jnp.int32(0) for a in range(x.ndim)]
    sizes = tuple(1 if a == axis else n for a, n in enumerate(x.shape))
    one = apply(DynamicSlice, x, *(jnp.asarray(s, jnp.int32) for s in starts), sizes=sizes)
    return apply(Reshape, one, shape=x.shape[:axis] + x.shape[axis + 1 :])


def _put(stacked, value, i):
    """stacked with element i replaced by value."""
    if not isinstance(stacked, DiskArray):
        return jax.lax.dynamic_update_index_in_dim(stacked, value, i, 0)
    if not isinstance(value, DiskArray):
        value = jnp.asarray(value, stacked.dtype)
    value = _reshape(value, (1, *value.shape))
    starts = (jnp.asarray(i, jnp.int32), *(jnp.int32(0) for _ in value.shape[1:]))
    return apply(DynamicUpdateSlice, stacked, value, *starts)
