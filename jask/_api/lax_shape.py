"""Rules for the jax.lax primitives that move elements: shapes, indexing and products (see
jask/_jax/primitives.py: an op that is one primitive declares it in its own file; these rules
combine ops or read the primitive's params).

A rule takes the primitive's operands and params as `Primitive.bind` receives them and returns
what the primitive returns. jax.numpy has applied its dtype and rank promotion before it binds
a primitive, so a rule implements the primitive's own semantics, nothing of jnp's.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._jax.diskarray import DiskArray
from .._jax.op import apply, describe, double_scalar
from .._jax.primitives import rule
from ..ops import BroadcastTo, Concatenate, DynamicUpdateSlice, Pad, Reshape, Slice, Transpose
from ..ops._elementwise import EngineDtypeError
from ..ops.in_memory import ToInMemory
from ..ops.reduce import filled
from . import indexing, linalg
from .operands import in_memory_limit, small_result


def _is_disk(x) -> bool:
    return isinstance(x, DiskArray)


def _small(shape) -> bool:
    return int(np.prod(shape, dtype=np.int64)) <= in_memory_limit()


@rule("transpose")
def transpose(x, *, permutation):
    perm = tuple(int(p) for p in permutation)
    return x if perm == tuple(range(x.ndim)) else apply(Transpose, x, perm=perm)


@rule("reshape")
def reshape(x, *, new_sizes, dimensions=None, sharding=None):
    if dimensions is not None:
        x = transpose(x, permutation=dimensions)
    shape = tuple(int(d) for d in new_sizes)
    return x if shape == x.shape else apply(Reshape, x, shape=shape)


@rule("squeeze")
def squeeze(x, *, dimensions):
    dims = {int(d) % x.ndim for d in dimensions}
    return reshape(x, new_sizes=tuple(d for i, d in enumerate(x.shape) if i not in dims))


@rule("broadcast_in_dim")
def broadcast_in_dim(x, *dyn_shape, shape, broadcast_dimensions, sharding=None):
    if dyn_shape:
        raise NotImplementedError("jax.lax.broadcast_in_dim of a DiskArray to a dynamic shape")
    shape = tuple(int(d) for d in shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    # operand axis i becomes output axis dims[i]: first order x's axes as their output axes,
    # then give x the output's rank (size-1 axes where it has none), then spread its size-1
    # axes to the output's sizes
    order = tuple(sorted(range(len(dims)), key=lambda i: dims[i]))
    x = transpose(x, permutation=order)
    dims = tuple(dims[i] for i in order)
    ranked = tuple(x.shape[dims.index(j)] if j in dims else 1 for j in range(len(shape)))
    x = reshape(x, new_sizes=ranked)
    return x if ranked == shape else apply(BroadcastTo, x, shape=shape)


@rule("concatenate")
def concatenate(*operands, dimension):
    parts = [p if _is_disk(p) else jnp.asarray(p) for p in operands]
    return apply(Concatenate, *parts, axis=int(dimension))


@rule("stack")
def stack(*operands, axis):
    """Operands of one shape joined along a new axis: each given a size-1 axis there, then
    concatenated."""
    axis = int(axis)
    parts = []
    for p in operands:
        shape = (*p.shape[:axis], 1, *p.shape[axis:])
        parts.append(reshape(p, new_sizes=shape) if _is_disk(p) else jnp.reshape(p, shape))
    return apply(Concatenate, *parts, axis=axis)


@rule("rev")
def rev(x, *, dimensions):
    flipped = {int(d) for d in dimensions}
    if not flipped or x.ndim == 0:
        return x
    selection = tuple(
        (n - 1, -1, n) if d in flipped and n > 1 else (0, 1, n) for d, n in enumerate(x.shape)
    )
    return apply(Slice, x, selection=selection)


def _pad_with_bytes(x, value, shape, placed):
    """lax.pad with a padding value the engine's double scalars do not hold (an int64 past 2**53,
    a complex number, or a traced one of those dtypes): x written over an array of the value's
    bytes. With interior padding, XLA pads it instead (xla_route)."""
    if any(step != 1 for _, step, _ in placed):
        raise EngineDtypeError(
            f"jask.pad: interior padding with a padding value the engine's double scalars do "
            f"not hold ({describe(value)})"
        )
    base = filled(value, shape, x.dtype)
    return apply(DynamicUpdateSlice, base, x, *(jnp.int32(start) for start, _, _ in placed))


@rule("slice")
def slice_(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    selection = tuple(
        (int(s), int(k), len(range(int(s), int(e), int(k))))
        for s, e, k in zip(start_indices, limit_indices, strides)
    )
    selection = tuple((s if n else 0, k if n > 1 else 1, n) for s, k, n in selection)
    return indexing.selected(x, selection)


@rule("pad")
def pad(x, padding_value, *, padding_config):
    if not _is_disk(x):
        raise NotImplementedError(
            f"jax.lax.pad of {describe(x)} with a DiskArray padding value {describe(padding_value)}"
        )
    config = [tuple(int(v) for v in c) for c in padding_config]
    # padding first (the non-negative part), then the crop of negative padding as a slice
    shape, placed, crop = [], [], []
    for n, (lo, hi, interior) in zip(x.shape, config):
        spread = n + max(n - 1, 0) * interior
        size = max(lo, 0) + spread + max(hi, 0)
        shape.append(size)
        placed.append((max(lo, 0) if n else 0, interior + 1 if n > 1 else 1, n))
        crop.append((-min(lo, 0), size + min(hi, 0) + min(lo, 0)))
    if isinstance(padding_value, DiskArray):  # a 0-d DiskArray: the kernel takes a scalar
        padding_value = apply(ToInMemory, padding_value)
    value = jnp.asarray(padding_value, x.dtype)
    if any(count < 0 for _, count in crop):
        raise ValueError(f"jax.lax.pad of {describe(x)} with {config}: negative output size")
    if tuple(shape) == tuple(x.shape) and all(s == (0, 1, n) for s, n in zip(placed, x.shape)):
        padded = x
    elif double_scalar(value) is not None:
        padded = apply(Pad, x, double_scalar(value), shape=tuple(shape), selection=tuple(placed))
    else:
        padded = _pad_with_bytes(x, value, shape, placed)
    selection = tuple((start if n else 0, 1, n) for start, n in crop)
    if all(s == (0, 1, n) for s, n in zip(selection, padded.shape)):
        return padded
    return apply(Slice, padded, selection=selection)


@rule("dynamic_slice")
def dynamic_slice(x, *starts_and_dyn, slice_sizes):
    return indexing.dynamic_slice(x, starts_and_dyn[: x.ndim], slice_sizes)


@rule("dynamic_update_slice")
def dynamic_update_slice(operand, update, *starts):
    return indexing.dynamic_update_slice(operand, update, starts)


@rule("gather")
def gather(
    operand,
    indices,
    *,
    dimension_numbers,
    slice_sizes,
    mode,
    fill_value=None,
    indices_are_sorted=False,
    unique_indices=False,
):
    return indexing.gather(operand, indices, dimension_numbers, slice_sizes, mode, fill_value)


def _scatter_rule(combine: str):
    def scatter(
        operand,
        indices,
        updates,
        *,
        dimension_numbers,
        mode,
        update_jaxpr=None,
        update_consts=(),
        indices_are_sorted=False,
        unique_indices=False,
    ):
        if update_jaxpr is not None and combine == "set":
            # x.at[i].apply(f): the update is f of the operand's element, which XLA computes
            raise NotImplementedError("jax.lax.scatter with an update function")
        return indexing.scatter(
            operand, indices, updates, dimension_numbers, mode, combine, unique_indices
        )

    scatter.__qualname__ = f"scatter_{combine}"
    return scatter


for _name, _combine in (
    ("scatter", "set"),
    ("scatter-add", "add"),
    ("scatter-mul", "mul"),
    ("scatter-min", "min"),
    ("scatter-max", "max"),
):
    rule(_name)(_scatter_rule(_combine))


@rule("dot_general")
def dot_general(
    lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None, out_sharding=None
):
    out = linalg.dot_general(lhs, rhs, dimension_numbers, preferred_element_type)
    if isinstance(out, DiskArray) and small_result(out.shape, lhs, rhs):
        return apply(ToInMemory, out)  # a small product is an in-memory value (operands.py)
    return out
