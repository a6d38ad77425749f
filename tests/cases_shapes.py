"""Generic op-test cases (run by test_transformations.py over every transformation and budget)."""

import jax
import jax.numpy as jnp
import numpy as np

import jask

from case import Case, K, M, N  # noqa: F401

# An in-memory operand joined to DiskArrays.
COLUMNS = jnp.asarray(np.random.default_rng(11).uniform(-1, 1, (M, 3)).astype(np.float32))


def traced_start(x, value):
    """`value` as an int32 that depends on x (traced under jit and the derivatives)."""
    return (jnp.sum(x[0, :1] * 0.0) + value).astype(jnp.int32)


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
    # jax.lax primitives bound to DiskArrays (jask/_api/lax_shape.py)
    Case(
        "pad_negative_interior_traced_value",
        *same(lambda x: jax.lax.pad(x, x[1, 2] * 3.0, ((2, -3, 1), (-5, 4, 0)))),
        ((M, K),),
    ),
    Case("rev", *same(lambda x: jax.lax.rev(x, (0, 1)) * 2.0), ((M, K),)),
    Case(
        "broadcast_in_dim_middle_axis",
        *same(lambda x: jax.lax.broadcast_in_dim(x, (M, 3, K), (0, 2)) * 1.0),
        ((M, K),),
    ),
    Case(
        "reshape_with_dimensions",
        *same(lambda x: jax.lax.reshape(x, (K * M,), dimensions=(1, 0)) * 2.0),
        ((M, K),),
    ),
    Case(
        "lax_slice_strided",
        *same(lambda x: jnp.sum(jnp.sin(jax.lax.slice(x, (3, 1), (M - 2, K), (2, 3))))),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "dynamic_slice_traced_clamped",
        *same(
            lambda x: jnp.sum(
                jnp.sin(
                    jax.lax.dynamic_slice(x, (traced_start(x, 150), traced_start(x, -4)), (100, 90))
                )
            )
        ),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "dynamic_slice_small_in_memory",
        *same(
            lambda x: jnp.sum(jnp.sin(jax.lax.dynamic_slice(x, (traced_start(x, 7), 3), (5, 4))))
        ),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "dynamic_update_slice_disk_update",
        *same(
            lambda x, u: jax.lax.dynamic_update_slice(
                x, u * 2.0, (traced_start(x, 200), traced_start(x, 3))
            )
        ),
        ((M, K), (40, 100)),
    ),
    Case(
        "dynamic_update_slice_in_memory_update",
        *same(lambda x: jax.lax.dynamic_update_slice(x, jnp.sin(x[:3, :5]), (7, 150))),
        ((M, K),),
    ),
]
