"""Generic op-test cases (run by test_transformations.py over every transformation and budget)."""

import jax.numpy as jnp
import numpy as np

import jask
import jask._api.operands

from case import Case, K, M, N  # noqa: F401

# Fixed mini-batch indices with duplicates and negative (from the end) entries.
IDX = np.array([5, 0, 5, M - 1, -1, 17, 3, 3, 3, -M, 100, 42, 6, 7, 8, 5])
IDX_2D = np.array([[0, -1, 12], [4, 4, -13], [7, 0, 2], [12, 11, 4]])  # into an axis of 13


def on_disk(fn):
    """fn with every jask.take result kept on disk (IN_MEMORY_LIMIT 0), as large gathers are.
    The choice is made while tracing, so it holds under jit and in the derivatives."""

    def run(*xs):
        saved, jask._api.operands.IN_MEMORY_LIMIT = jask._api.operands.IN_MEMORY_LIMIT, 0
        try:
            return fn(*xs)
        finally:
            jask._api.operands.IN_MEMORY_LIMIT = saved

    return run


CASES: list[Case] = [
    Case(
        "take_rows_to_disk",
        on_disk(lambda x: jask.take(x, IDX, axis=0)),
        lambda x: jnp.take(x, IDX, axis=0),
        ((M, K),),
    ),
    Case(
        "take_rows_in_memory_times_disk",
        lambda x, y: jask.take(x, IDX, axis=0) * y + y,
        lambda x, y: jnp.take(x, IDX, axis=0) * y + y,
        ((M, K), (len(IDX), K)),
    ),
    Case(
        "jnp_take_3d_2d_indices",
        lambda x: jnp.sum(jnp.tanh(jnp.take(x, IDX_2D, axis=0)) * 1.5),
        lambda x: jnp.sum(jnp.tanh(jnp.take(x, IDX_2D, axis=0)) * 1.5),
        ((13, 17, 11),),
        scalar_out=True,
    ),
]
