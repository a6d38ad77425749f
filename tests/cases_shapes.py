"""Generic op-test cases (run by test_transformations.py over every transformation and budget)."""

import jax.numpy as jnp
import numpy as np

import jask

from case import Case, K, M, N  # noqa: F401

# An in-memory operand joined to DiskArrays.
COLUMNS = jnp.asarray(np.random.default_rng(11).uniform(-1, 1, (M, 3)).astype(np.float32))


def same(fn):
    """A case whose code runs unchanged on DiskArrays and on jnp arrays."""
    return fn, fn


CASES: list[Case] = [
    # Slices this small come back as jax.Arrays (IN_MEMORY_LIMIT); their gradients are DiskArrays.
    Case(
        "slice_columns",
        *same(lambda x: jnp.sum(jnp.sin(x[:, 5]) * x[:, 7])),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "slice_strided", *same(lambda x: jnp.sum(x[3:150:2, 10:] ** 2)), ((M, K),), scalar_out=True
    ),
    Case(
        "slice_newaxis_ellipsis",
        *same(lambda x: jnp.sum(jnp.tanh(x[None, ..., 4]))),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "slice_negative_steps",
        *same(lambda x: jnp.sum(jnp.exp(x[::-3, 100:5:-2]))),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "slice_3d",
        *same(lambda x: jnp.sum(x[5, :, 1:4] ** 2) + jnp.sum(x[..., 2:9:3] ** 3)),
        ((13, 17, 11),),
        scalar_out=True,
    ),
    Case(
        "concatenate_axis0",
        lambda a, b: jask.concatenate([a, b]),
        lambda a, b: jnp.concatenate([a, b]),
        ((M, K), (17, K)),
    ),
    Case(
        "concatenate_axis1_with_in_memory",
        *same(lambda a, b: jnp.concatenate([a, COLUMNS, b], axis=1)),
        ((M, K), (M, N)),
    ),
    Case("stack_three", *same(lambda a, b, c: jnp.stack([a, b, c], axis=-2) * 2.0), ((M, N),) * 3),
    Case(
        "vstack_hstack",
        *same(lambda a, b, c: jnp.vstack([jnp.hstack([a, b]), c])),
        ((M, K), (M, N), (7, K + N)),
    ),
]
