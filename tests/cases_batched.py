"""Generic op-test cases (run by test_transformations.py over every transformation and budget):
matrix products with batch axes, in-memory weights and batched einsum."""

import jax.numpy as jnp
import numpy as np

import jask

from case import Case, K, M, N  # noqa: F401

# Sizes that are not multiples of any tile size.
B, R, C, P = 5, 41, 29, 13
# In-memory weights multiplied with DiskArrays, on the right and on the left.
W_RIGHT = jnp.asarray(np.random.default_rng(21).uniform(-1, 1, (C, P)).astype(np.float32))
W_LEFT = jnp.asarray(np.random.default_rng(22).uniform(-1, 1, (7, R)).astype(np.float32))


def same(fn):
    """A case whose code runs unchanged on DiskArrays and on jnp arrays."""
    return fn, fn


def einsum(spec):
    return same(lambda a, b: jnp.einsum(spec, a, b))


CASES: list[Case] = [
    Case("matmul_batched", jask.matmul, jnp.matmul, ((B, R, C), (B, C, P))),
    Case("matmul_broadcast_batches", *same(lambda a, b: a @ b), ((3, 1, R, C), (4, C, P))),
    Case("matmul_batch_times_matrix", *same(lambda a, b: jnp.matmul(a, b)), ((B, R, C), (C, P))),
    Case("matmul_matrix_times_batch", *same(lambda a, b: a @ b), ((R, C), (4, C, P))),
    Case("matmul_vector_times_batch", *same(lambda v, b: v @ b), ((C,), (4, C, P))),
    Case("matmul_batch_times_vector", *same(lambda a, v: a @ v), ((2, 3, R, C), (C,))),
    Case("matmul_in_memory_weights", *same(lambda x: W_LEFT @ jnp.tanh(x @ W_RIGHT)), ((B, R, C),)),
    Case("einsum_batched", *einsum("bij,bjk->bik"), ((B, R, C), (B, C, P))),
    Case("einsum_batch_times_matrix", *einsum("bij,jk->bik"), ((B, R, C), (C, P))),
    Case("einsum_attention_scores", *einsum("bik,bjk->bij"), ((B, R, C), (B, P, C))),
    Case("einsum_matrix_times_batch", *einsum("ij,bjk->bik"), ((R, C), (B, C, P))),
    Case("einsum_batch_not_leading", *einsum("ibj,bjk->bki"), ((R, B, C), (B, C, P))),
    Case(
        "einsum_batched_inner",
        *same(lambda a, b: jnp.sum(jnp.einsum("bi,bi->b", a, b) ** 2)),
        ((R, C), (R, C)),
        scalar_out=True,
    ),
]
