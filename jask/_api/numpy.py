"""The jax.numpy surface: each `jask` function with a namesake in jax.numpy, jax.nn or jax.lax
is that function.

A DiskArray is a jax.Array whose primitives Jask implements, so `jnp.sum(x)` already streams a
DiskArray `x`; `jask.sum` is `jnp.sum` itself, with jnp's signature, dtype rules and errors,
and it takes in-memory arrays and scalars as jnp does (`jask.square(jask.mean(x, axis=0))`
works whether the mean is a DiskArray or, being small, a jax.Array). Jask's own functions
(creating DiskArrays, reading rows, materializing) live in the other modules of this package.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NAMESAKES = {
    # elementwise
    "abs": jnp.abs,
    "add": jnp.add,
    "astype": jnp.astype,
    "clip": jnp.clip,
    "cos": jnp.cos,
    "divide": jnp.divide,
    "equal": jnp.equal,
    "exp": jnp.exp,
    "expm1": jnp.expm1,
    "greater": jnp.greater,
    "greater_equal": jnp.greater_equal,
    "less": jnp.less,
    "less_equal": jnp.less_equal,
    "log": jnp.log,
    "log1p": jnp.log1p,
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
    "mul": jnp.multiply,
    "negative": jnp.negative,
    "not_equal": jnp.not_equal,
    "power": jnp.power,
    "sign": jnp.sign,
    "sin": jnp.sin,
    "sqrt": jnp.sqrt,
    "square": jnp.square,
    "sub": jnp.subtract,
    "tanh": jnp.tanh,
    "where": jnp.where,
    "rsqrt": jax.lax.rsqrt,
    "gelu": jax.nn.gelu,
    "relu": jax.nn.relu,
    "sigmoid": jax.nn.sigmoid,
    "softplus": jax.nn.softplus,
    # reductions
    "sum": jnp.sum,
    "max": jnp.max,
    "min": jnp.min,
    "prod": jnp.prod,
    "mean": jnp.mean,
    "var": jnp.var,
    "logsumexp": jax.nn.logsumexp,
    "softmax": jax.nn.softmax,
    "log_softmax": jax.nn.log_softmax,
    # shapes and products
    "broadcast_to": jnp.broadcast_to,
    "concatenate": jnp.concatenate,
    "reshape": jnp.reshape,
    "stack": jnp.stack,
    "transpose": jnp.transpose,
    "take": jnp.take,
    "dot": jnp.dot,
    "einsum": jnp.einsum,
    "matmul": jnp.matmul,
    "outer": jnp.outer,
    "vdot": jnp.vdot,
}
"""jask name -> the jax.numpy / jax.nn / jax.lax function it is."""

globals().update(NAMESAKES)
