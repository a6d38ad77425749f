"""Rules for the jax.lax primitives computed elementwise (see jask/_jax/primitives.py: an op
that is one primitive declares it in its own file; these rules combine ops or read the
primitive's params).

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
from ..ops import Astype, Div, Mul, Square, Where


def _is_disk(x) -> bool:
    return isinstance(x, DiskArray)


@rule("convert_element_type")
def convert_element_type(x, *, new_dtype, weak_type=False, sharding=None):
    dtype = np.dtype(new_dtype)
    return x if dtype == x.dtype else apply(Astype, x, dtype=dtype)


@rule("select_n")
def select_n(which, *cases):
    if len(cases) == 1:
        return cases[0]
    if len(cases) != 2:
        raise NotImplementedError(f"jax.lax.select_n with {len(cases)} cases on a DiskArray")
    if not _is_disk(which):
        which = jnp.asarray(which)
    if which.dtype != np.bool_:
        which = which != 0
    false_case, true_case = (c if _is_disk(c) else jnp.asarray(c) for c in cases)
    return apply(Where, which, true_case, false_case)


@rule("integer_pow")
def integer_pow(x, *, y):
    """x ** y for a Python int y, by squaring (as XLA expands it): |y| costs log2|y| products."""
    if y == 0:
        return apply(Astype, x * 0, dtype=x.dtype) + 1
    result, base, n = None, x, abs(int(y))
    while n:
        if n & 1:
            result = base if result is None else apply(Mul, result, base)
        n >>= 1
        if n:
            base = apply(Square, base)
    return result if y > 0 else apply(Div, jnp.ones((), x.dtype), result)
