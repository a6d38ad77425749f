"""Rules for the jax.lax primitives that are neither elementwise, reductions nor shape changes
(see jask/_jax/primitives.py; ops that are one primitive declare it in their own file).

Each rule takes the primitive's operands and params as `Primitive.bind` receives them, and
returns what the primitive returns. jax.numpy has already applied its dtype promotion and
rank promotion by the time a primitive is bound, so a rule implements the primitive's own
semantics (equal dtypes, size-1 broadcasting) and nothing of jnp's.
"""

from __future__ import annotations

import jax.numpy as jnp

from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy, from_in_memory, is_disk_array
from .._jax.op import apply
from .._jax.primitives import rule
from ..ops import Astype, Concatenate, StopGradient, ToInMemory
from . import indexing


@rule("custom_linear_solve")
def custom_linear_solve(*args, const_lengths, jaxprs):
    """The solve function applied to the right-hand side, at the caller's trace: its functions
    were traced on DiskArrays, so Jask's rules compute them (not XLA's in-memory route)."""
    expected = []  # the operands' types as the functions were traced with them
    for name in ("matvec", "vecmat", "solve", "transpose_solve"):
        jaxpr = getattr(jaxprs, name)
        n = getattr(const_lengths, name)
        expected += list(jaxpr.in_avals[:n]) if jaxpr is not None else [None] * n
    expected += list(jaxprs.solve.in_avals[const_lengths.solve :])
    args = [
        from_in_memory(a) if isinstance(t, DiskArrayTy) and not isinstance(a, DiskArray) else a
        for a, t in zip(args, expected)
    ]
    out = compat.custom_linear_solve(*args, const_lengths=const_lengths, jaxprs=jaxprs)
    # the primitive's results have the right-hand side's types (its abstract evaluation's),
    # whatever kind the solve function's steps gave (JAX's derivative rules feed them back to
    # the matvec function traced on those types)
    b = args[sum(const_lengths) :]
    return [_kind_of(x, compat.typeof(rhs)) for x, rhs in zip(out, b)] + list(out[len(b) :])


def _kind_of(x, aval):
    """x as a DiskArray where `aval` is a DiskArray's type, in memory where it is not."""
    if isinstance(aval, DiskArrayTy) and not is_disk_array(x):
        return from_in_memory(x)
    if not isinstance(aval, DiskArrayTy) and is_disk_array(x):
        return apply(ToInMemory, x)
    return x


@rule("stop_gradient")
def stop_gradient(x):
    if not compat.at_evaluation_or_staging():
        # JAX's rule gives the symbolic zero tangent that JAX's (and lineax's) rules check
        # for; it binds the primitive again on the primal, which comes back here
        return compat.stop_gradient_by_jax(x)
    return apply(StopGradient, x)


@rule("copy")
def copy(x):
    """A new array with x's values (an independent file: a later x.update_ leaves it as it was)."""
    return apply(Astype, x, dtype=x.dtype)


@rule("unstack")
def unstack(x, *, axis):
    """The slices of x along `axis`, that axis removed."""
    shape = x.shape[:axis] + x.shape[axis + 1 :]
    return [jnp.reshape(part, shape) for part in split(x, sizes=(1,) * x.shape[axis], axis=axis)]


@rule("tile")
def tile(x, *, reps):
    """x repeated reps[i] times along each axis i."""
    for axis, count in enumerate(reps):
        if count != 1:
            x = apply(Concatenate, *([x] * int(count)), axis=axis)
    return x


def _with_axis(x, axis):
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    return jnp.reshape(x, shape)


@rule("split")
def split(x, *, sizes, axis):
    """Consecutive slices of x along `axis`, of the given sizes."""
    parts, start = [], 0
    for size in sizes:
        key = (slice(None),) * axis + (slice(start, start + int(size)),)
        parts.append(indexing.getitem(x, key))
        start += int(size)
    return parts
