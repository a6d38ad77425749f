"""Rules for the jax.lax primitives that reduce (see jask/_jax/primitives.py: an op that is
one primitive declares it in its own file; these rules combine ops or read the primitive's
params).

A rule takes the primitive's operands and params as `Primitive.bind` receives them and returns
what the primitive returns. jax.numpy has applied its dtype and rank promotion before it binds
a primitive, so a rule implements the primitive's own semantics, nothing of jnp's.
"""

from __future__ import annotations

from .._jax.primitives import rule
from . import reductions


def _reduction(reduction: str):
    def reduce(x, *, axes, out_sharding=None):
        return reductions._reduce(x, tuple(int(a) for a in axes), False, reduction) if axes else x

    reduce.__qualname__ = f"reduce_{reduction}"
    return reduce


for _reduction_name in ("sum", "max", "min", "prod"):
    rule(f"reduce_{_reduction_name}")(_reduction(_reduction_name))
