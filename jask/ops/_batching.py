"""jax.vmap of Jask ops: the op runs once per batch element and the results are stacked.

Elements of a batched DiskArray are slices of its file (views where they are contiguous);
stacked DiskArray results are one new file. A batch of n costs n passes over the op's
unbatched DiskArrays, which is what a Python loop over the batch would cost.
"""

import jax
import jax.numpy as jnp

from .._jax.diskarray import DiskArray
from .._jax.op import apply
from .concatenate import Concatenate
from .reshape import Reshape
from .slice import Slice


def run_per_element(prim, size: int, args, dims):
    """(results stacked along axis 0, their batch axes) of `prim` over a batch of `size`."""
    if size == 0:
        raise NotImplementedError(
            f"jax.vmap of jask.{prim.name} over an empty batch axis is not supported"
        )
    results = [
        prim(*(x if d is None else _element(x, d, b) for x, d in zip(args, dims)))
        for b in range(size)
    ]
    if isinstance(prim.out_aval, tuple):
        stacked = tuple(_stack([r[i] for r in results]) for i in range(len(prim.out_aval)))
        return stacked, tuple(0 for _ in stacked)
    return _stack(results), 0


def _element(x, axis: int, b: int):
    if isinstance(x, DiskArray):
        selection = tuple((b, 1, 1) if d == axis else (0, 1, n) for d, n in enumerate(x.shape))
        one = apply(Slice, x, selection=selection)
        return apply(Reshape, one, shape=x.shape[:axis] + x.shape[axis + 1 :])
    return jax.lax.index_in_dim(x, b, axis, keepdims=False)


def _stack(values):
    if isinstance(values[0], DiskArray):
        return apply(Concatenate, *(apply(Reshape, v, shape=(1, *v.shape)) for v in values), axis=0)
    return jnp.stack(values)
