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
from .._jax.op import apply
from .._jax.primitives import rule
from ..ops import Astype, BroadcastTo, Concatenate, Reshape, Transpose
from . import linalg


def _is_disk(x) -> bool:
    return isinstance(x, DiskArray)


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
    shape = tuple(int(d) for d in shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    # operand axis i becomes output axis dims[i]: first give x the output's rank (size-1 axes
    # where it has none), then spread the size-1 axes to the output's sizes
    ranked = tuple(x.shape[dims.index(j)] if j in dims else 1 for j in range(len(shape)))
    if dims != tuple(sorted(dims)):
        raise NotImplementedError(
            f"jax.lax.broadcast_in_dim of a DiskArray {x.shape} with broadcast_dimensions {dims} "
            f"out of order"
        )
    x = reshape(x, new_sizes=ranked)
    return x if ranked == shape else apply(BroadcastTo, x, shape=shape)


@rule("concatenate")
def concatenate(*operands, dimension):
    return apply(Concatenate, *operands, axis=int(dimension))


@rule("dot_general")
def dot_general(
    lhs,
    rhs,
    *,
    dimension_numbers,
    precision=None,
    preferred_element_type=None,
    out_sharding=None,
    **_,
):
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in t) for t in (lc, rc, lb, rb))
    if preferred_element_type is not None:
        out_dtype = np.dtype(preferred_element_type)
    else:
        out_dtype = np.result_type(lhs.dtype, rhs.dtype)
    # move to (batch..., free..., contract...) @ (batch..., contract..., free...)
    lf = tuple(d for d in range(lhs.ndim) if d not in lc and d not in lb)
    rf = tuple(d for d in range(rhs.ndim) if d not in rc and d not in rb)
    if not (lb or lf or rf):  # a full contraction: one pass, summed in double
        a = transpose(lhs, permutation=lc) if _is_disk(lhs) else jnp.transpose(lhs, lc)
        b = transpose(rhs, permutation=rc) if _is_disk(rhs) else jnp.transpose(rhs, rc)
        out = linalg.vdot(_reshaped(a, (a.size,)), _reshaped(b, (b.size,)))
        return out if out.dtype == out_dtype else out.astype(out_dtype)
    a = (
        transpose(lhs, permutation=lb + lf + lc)
        if _is_disk(lhs)
        else jnp.transpose(lhs, lb + lf + lc)
    )
    b = (
        transpose(rhs, permutation=rb + rc + rf)
        if _is_disk(rhs)
        else jnp.transpose(rhs, rb + rc + rf)
    )
    batch = tuple(lhs.shape[d] for d in lb)
    m = int(np.prod([lhs.shape[d] for d in lf], dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    n = int(np.prod([rhs.shape[d] for d in rf], dtype=np.int64))
    a = _reshaped(a, batch + (m, k))
    b = _reshaped(b, batch + (k, n))
    out = linalg.matmul(a, b)
    out_shape = batch + tuple(lhs.shape[d] for d in lf) + tuple(rhs.shape[d] for d in rf)
    out = _reshaped(out, out_shape)
    return out if out.dtype == out_dtype else apply(Astype, out, dtype=out_dtype)


def _reshaped(x, shape):
    if _is_disk(x):
        return reshape(x, new_sizes=shape)
    return jnp.reshape(x, shape)
