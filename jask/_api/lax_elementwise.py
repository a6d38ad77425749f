"""Rules for the jax.lax primitives computed elementwise whose params choose between ops or
whose operands need arranging (see jask/_jax/primitives.py: an op that is one primitive
declares it in its own file, as `Sin`, `IntegerPow` and `Clamp` do).

A rule takes the primitive's operands and params as `Primitive.bind` receives them and returns
what the primitive returns. jax.numpy has applied its dtype and rank promotion before it binds
a primitive, so a rule implements the primitive's own semantics, nothing of jnp's.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._dtypes import storage_dtype
from .._jax.diskarray import DiskArray, is_disk_array, weak_type_setter
from .._jax.op import apply, describe, weakly_typed
from .._jax.primitives import rule
from ..ops import Astype, Reshape, Where


def _is_disk(x) -> bool:
    return isinstance(x, DiskArray)


@rule("convert_element_type")
def convert_element_type(x, *, new_dtype, weak_type=False, sharding=None):
    dtype = storage_dtype(new_dtype)
    if dtype == x.dtype:
        return set_weak_type(x, weak_type)
    return apply(Astype, x, dtype=dtype, weak_type=weak_type)


@weak_type_setter
def set_weak_type(x, weak: bool):
    """x with JAX's weak_type flag `weak`: a DiskArray as a view of its file of that type (no
    copy), an in-memory value as jax.numpy converts it."""
    if getattr(x, "weak_type", False) == bool(weak):
        return x
    if is_disk_array(x):
        return apply(Reshape, x, shape=x.shape, weak_type=weak)
    return weakly_typed(x, weak)


@rule("select_n")
def select_n(which, *cases):
    """cases[which]: `which` bool (two cases) or int32 (any number; out of range picks the
    last, as XLA's chain of selects does)."""
    if not cases:
        raise TypeError("jax.lax.select_n needs at least one case")
    if len(cases) == 1:
        return cases[0]
    which = which if _is_disk(which) else jnp.asarray(which)
    if which.dtype == np.bool_:
        if len(cases) != 2:
            raise TypeError(
                f"jax.lax.select_n with a bool predicate takes 2 cases, not {len(cases)}"
            )
        return apply(Where, which, cases[1], cases[0])
    if which.dtype != np.int32:
        raise TypeError(
            f"jax.lax.select_n: the predicate must be bool or int32, not {describe(which)}"
        )
    result = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        result = apply(Where, which == k, cases[k], result)
    return result
