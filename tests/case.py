"""The generic op-test case (see test_transformations.py) and the shapes the cases use."""

from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

# Shapes that are not multiples of any block or tile size.
M, K, N = 211, 157, 37
BIAS = jnp.asarray(
    np.random.default_rng(7).uniform(-1, 1, K).astype(np.float32)
)  # an in-memory operand


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable  # written with Jask ops; same code runs on jnp arrays when `ref` is None
    ref: Callable  # the jax.numpy reference
    shapes: tuple  # operand shapes
    scalar_out: bool = False  # fn returns a 0-d value (else a DiskArray, reduced by a weighted sum)
