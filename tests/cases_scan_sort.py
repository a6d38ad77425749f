"""Generic op-test cases for the reductions, scans and sorts reached through jax.lax primitives
(run by test_transformations.py over every transformation and budget). Each function is plain
jax.numpy / jax.lax code: the same code is the reference on jnp arrays."""

import jax
import jax.numpy as jnp

from case import Case, K, M, N
from cases_gather import on_disk

# Sorted rows (and the rows the derivatives of cummax and cummin gather along) are held in
# memory whole: rows short enough for the smallest test budget (4KB).
ROW = 23


def _case(name, fn, shapes, scalar_out=False):
    return Case(name, fn, fn, shapes, scalar_out=scalar_out)


CASES: list[Case] = [
    _case("lax_cumsum_axis0", lambda x: jnp.cumsum(x, axis=0), ((M, K),)),
    _case("lax_cumsum_reverse", lambda x: jax.lax.cumsum(x, axis=1, reverse=True), ((M, K),)),
    _case("lax_cumprod", lambda x: jnp.cumprod(x * 0.1 + 1.0, axis=1), ((M, K),)),
    # the derivatives of cummax and cummin move values along rows held in memory
    _case("lax_cummax_axis0", lambda x: jax.lax.cummax(x, axis=0), ((ROW, N),)),
    _case("lax_cummin_reverse", lambda x: jax.lax.cummin(x, axis=1, reverse=True), ((M, ROW),)),
    _case("lax_cumlogsumexp", lambda x: jax.lax.cumlogsumexp(x, axis=0), ((M, N),)),
    _case("lax_sort_last_axis", lambda x: jnp.sort(x, axis=1), ((M, ROW),)),
    _case("lax_sort_axis0", lambda x: jnp.sort(x, axis=0), ((ROW, N),)),
    _case(
        "lax_sort_key_val",
        lambda x, y: jax.lax.sort_key_val(x, y, dimension=1)[1] * x,
        ((M, ROW), (M, ROW)),
    ),
    _case("lax_top_k", lambda x: jax.lax.top_k(x, 5)[0], ((M, ROW),)),
    _case(
        "lax_argmax_weights",
        lambda x: x * jnp.argmax(x, axis=1, keepdims=True).astype(jnp.float32),
        ((M, K),),
    ),
    _case(
        "lax_argmin_on_disk",
        on_disk(lambda x: x * jax.lax.argmin(x, 0, jnp.int32).astype(jnp.float32)),
        ((M, K),),
    ),
    _case("lax_max_keepdims", lambda x: x - jnp.max(x, axis=1, keepdims=True), ((M, K),)),
    # small reductions come back in memory: each is combined with x into a DiskArray
    _case(
        "lax_min_two_axes",
        lambda x: x - jnp.min(x, axis=(0, 2), keepdims=True),
        ((13, 17, 11),),
    ),
    _case("lax_prod_axis0", lambda x: x * jnp.prod(x * 0.1 + 1.0, axis=0), ((M, N),)),
    _case("lax_var_axis1", lambda x: x * jnp.var(x, axis=1, keepdims=True), ((M, K),)),
    _case("lax_norm_axis0", lambda x: x / jnp.linalg.norm(x, axis=0), ((M, K),)),
    _case("lax_logsumexp", lambda x: x - jax.nn.logsumexp(x, axis=1, keepdims=True), ((M, K),)),
    _case("lax_softmax", lambda x: jax.nn.softmax(x, axis=0), ((M, K),)),
    _case("lax_sum_where", lambda x: x * jnp.sum(x, axis=0, where=x > 0), ((M, K),)),
    # large reductions stay on disk (lax's functions: jnp's are jitted, and a trace made under
    # the usual in-memory limit would be reused)
    _case("lax_sum_to_disk", on_disk(lambda x: jax.lax.reduce_sum(x, (1,))), ((M, K),)),
    _case("lax_max_to_disk", on_disk(lambda x: jax.lax.reduce_max(x, (0,))), ((M, K),)),
]
