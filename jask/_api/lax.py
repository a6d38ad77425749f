"""Rules for the jax.lax primitives that are neither elementwise, reductions nor shape changes
(see jask/_jax/primitives.py; ops that are one primitive declare it in their own file).

Each rule takes the primitive's operands and params as `Primitive.bind` receives them, and
returns what the primitive returns. jax.numpy has already applied its dtype promotion and
rank promotion by the time a primitive is bound, so a rule implements the primitive's own
semantics (equal dtypes, size-1 broadcasting) and nothing of jnp's.
"""

from __future__ import annotations

from .._jax.op import apply
from .._jax.primitives import rule
from ..ops import StopGradient
from . import indexing


@rule("stop_gradient")
def stop_gradient(x):
    return apply(StopGradient, x)


@rule("copy")
def copy(x):
    return x


@rule("split")
def split(x, *, sizes, axis):
    """Consecutive slices of x along `axis`, of the given sizes."""
    parts, start = [], 0
    for size in sizes:
        key = (slice(None),) * axis + (slice(start, start + int(size)),)
        parts.append(indexing.getitem(x, key))
        start += int(size)
    return parts
