"""Generic op-test cases of the elementwise primitives (run by test_transformations.py over
every transformation and budget): each runs unchanged on DiskArrays and on jnp arrays, whose
inputs are uniform in (-1, 1), mapped into the function's domain."""

import jax
import jax.numpy as jnp
from jax import lax

from case import Case, K, M


def same(fn):
    """A case whose code runs unchanged on DiskArrays and on jnp arrays."""
    return fn, fn


def unary(name, fn):
    return Case(name, *same(fn), ((M, K),))


def ints(x):
    """x as small int32 values (no derivative), for the integer primitives."""
    return (x * 40).astype(jnp.int32)


CASES: list[Case] = [
    unary("tan", jnp.tan),
    unary("asin_acos_atan", lambda x: jnp.arcsin(x * 0.9) + jnp.arccos(x * 0.8) * jnp.arctan(x)),
    Case("atan2", *same(lambda x, y: jnp.arctan2(x, y + 1.5)), ((M, K), (M, K))),
    unary("sinh_cosh", lambda x: jnp.sinh(x) * jnp.cosh(x * 2)),
    unary(
        "asinh_acosh_atanh", lambda x: jnp.arcsinh(x) + jnp.arccosh(x + 2.5) * jnp.arctanh(x * 0.9)
    ),
    unary("exp2_cbrt", lambda x: jnp.exp2(x) * jnp.cbrt(x + 2)),
    unary("erf_erfc_erf_inv", lambda x: lax.erf(x) + lax.erfc(x) * lax.erf_inv(x * 0.9)),
    # digamma is lgamma's derivative, trigamma its second (the Hessian-vector products)
    unary("lgamma", lambda x: lax.lgamma(x + 1.5) * x),
    unary(
        "floor_ceil_round", lambda x: x * (jnp.floor(x * 3) + jnp.ceil(x * 2) + jnp.round(x * 5))
    ),
    unary("round_away", lambda x: x * lax.round(x * 4.5, lax.RoundingMethod.AWAY_FROM_ZERO)),
    unary("is_finite", lambda x: jnp.where(jnp.isfinite(jnp.log(x)), x, -x)),
    Case("rem", *same(lambda x, y: lax.rem(x * 3, y + 1.5)), ((M, K), (M, K))),
    # ones_like(x) carries no tangent (jax.lax.nextafter has no derivative)
    unary("nextafter", lambda x: jnp.nextafter(jnp.ones_like(x), 2.0) * x),
    unary("integer_pow", lambda x: x**3 + lax.integer_pow(x, -2) * 0.01 + x**0),
    unary("clamp", lambda x: lax.clamp(-0.5, x, 0.5) + jnp.clip(x * 2, -1, 1)),
    unary(
        "bool_logic", lambda x: jnp.where(((x > 0) & (x < 0.5)) | ~(x > 0.9) ^ (x < -0.5), x, 0.0)
    ),
    unary(
        "int32_bits_and_shifts",
        lambda x: (
            x
            * (
                lax.shift_left(ints(x), 2)
                + lax.shift_right_logical(ints(x), 1)
                + lax.shift_right_arithmetic(ints(x), 3)
                + (ints(x) & 7 | 8 ^ ~ints(x))
                + ints(x) // 3
                + ints(x) % 5
            ).astype(jnp.float32)
        ),
    ),
    unary("select_n_int32", lambda x: lax.select_n((jnp.abs(ints(x)) % 3), x, x * 2, -x)),
    # no Jask rule: XLA computes it, in memory at the larger budgets, block by block at the
    # smallest (jask/_api/xla_route.py, jask/ops/block_map.py)
    # (its result is in memory when it fits, a DiskArray when streamed: the case sums it)
    Case(
        "polygamma_by_xla",
        *same(lambda x: jnp.sum(jax.scipy.special.polygamma(1, x + 2.0))),
        ((M, K),),
        scalar_out=True,
    ),
]
