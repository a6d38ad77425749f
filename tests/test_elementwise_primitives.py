"""Every elementwise jax.lax primitive on DiskArrays against the same function on jnp arrays:
values and dtypes eagerly and under jit, jax.grad and jax.jvp, on shapes that are not multiples
of any block size and under budgets that make many blocks; int32, bool and the narrow float
dtypes as XLA's CPU backend computes them; operands of different dtypes refused."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import jask

from conftest import jvp_reference

SHAPE = (61, 43)  # 2623 elements: not a multiple of any block or register chunk
I32 = np.iinfo(np.int32)


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def uniform(rng, lo, hi, dtype=np.float32, shape=SHAPE):
    return rng.uniform(lo, hi, shape).astype(dtype)


def assert_same(got, want, rtol=2e-6, atol=1e-6):
    """Values and dtype as jnp's (NaN where jnp has NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
        )


def check(fn, *arrays, rtol=2e-6, atol=1e-6):
    """fn on DiskArrays, eagerly and under jit, against fn on jnp arrays."""
    want = fn(*[jnp.asarray(a) for a in arrays])
    for f in (fn, jax.jit(fn)):
        out = f(*[disk(a) for a in arrays])
        assert isinstance(out, jask.DiskArray), type(out)
        assert_same(out, want, rtol, atol)


# name, function, input range, (value rtol, atol), differentiable
UNARY = [
    ("sin", jnp.sin, (-3, 3)),
    ("cos", jnp.cos, (-3, 3)),
    ("tan", jnp.tan, (-1.2, 1.2)),
    ("asin", jnp.arcsin, (-0.95, 0.95)),
    ("acos", jnp.arccos, (-0.95, 0.95)),
    ("atan", jnp.arctan, (-3, 3)),
    ("sinh", jnp.sinh, (-3, 3)),
    ("cosh", jnp.cosh, (-3, 3)),
    ("asinh", jnp.arcsinh, (-3, 3)),
    ("acosh", jnp.arccosh, (1.1, 4)),
    ("atanh", jnp.arctanh, (-0.9, 0.9)),
    ("exp", jnp.exp, (-3, 3)),
    ("exp2", jnp.exp2, (-3, 3)),
    ("log", jnp.log, (0.1, 4)),
    ("log1p", jnp.log1p, (-0.9, 3)),
    ("expm1", jnp.expm1, (-3, 3)),
    ("sqrt", jnp.sqrt, (0.1, 4)),
    ("rsqrt", lax.rsqrt, (0.1, 4)),
    ("cbrt", jnp.cbrt, (0.2, 4)),
    ("erf", lax.erf, (-3, 3)),
    ("erfc", lax.erfc, (-3, 3)),
    ("erf_inv", lax.erf_inv, (-0.9, 0.9)),
    ("lgamma", lax.lgamma, (0.2, 5)),
    ("digamma", lax.digamma, (0.2, 5)),
    ("floor", jnp.floor, (-3, 3)),
    ("ceil", jnp.ceil, (-3, 3)),
    ("round_even", jnp.round, (-3, 3)),
    ("round_away", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), (-3, 3)),
    ("logistic", jax.nn.sigmoid, (-4, 4)),
    ("sign", jnp.sign, (-3, 3)),
    ("abs", jnp.abs, (-3, 3)),
    ("neg", jnp.negative, (-3, 3)),
    ("tanh", jnp.tanh, (-3, 3)),
    ("square", jnp.square, (-3, 3)),
    ("integer_pow_3", lambda x: x**3, (-2, 2)),
    ("integer_pow_7", lambda x: lax.integer_pow(x, 7), (-1.5, 1.5)),
    ("integer_pow_neg_2", lambda x: x**-2, (0.5, 2)),
    ("integer_pow_0", lambda x: lax.integer_pow(x, 0), (-2, 2)),
    ("relu", jax.nn.relu, (-3, 3)),
]
# XLA's float32 lgamma and digamma are approximations a few ulp off (Jask's are exact to
# float32): compared with an absolute tolerance.
LOOSE = {"lgamma": 2e-5, "digamma": 2e-5, "erf_inv": 1e-5}

BINARY = [
    ("add", jnp.add, (-3, 3), (-3, 3)),
    ("sub", jnp.subtract, (-3, 3), (-3, 3)),
    ("mul", jnp.multiply, (-3, 3), (-3, 3)),
    ("div", jnp.divide, (-3, 3), (0.5, 3)),
    ("rem", lax.rem, (-5, 5), (0.5, 2)),
    ("pow", jnp.power, (0.2, 3), (-2, 2)),
    ("atan2", jnp.arctan2, (-3, 3), (-3, 3)),
    ("max", jnp.maximum, (-3, 3), (-3, 3)),
    ("min", jnp.minimum, (-3, 3), (-3, 3)),
]
COMPARISONS = [jnp.less, jnp.less_equal, jnp.greater, jnp.greater_equal, jnp.equal, jnp.not_equal]


@pytest.mark.parametrize("name,fn,bounds", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values_eager_and_jit(name, fn, bounds, rng):
    check(fn, uniform(rng, *bounds), atol=LOOSE.get(name, 1e-6))


@pytest.mark.parametrize("name,fn,bounds", UNARY, ids=[u[0] for u in UNARY])
def test_unary_grad_and_jvp(name, fn, bounds, rng):
    x = uniform(rng, *bounds)
    w = jnp.asarray(uniform(rng, -1, 1))

    def loss(v):
        return jnp.sum(fn(v) * w)

    tol = dict(rtol=1e-5, atol=LOOSE.get(name, 1e-5) * 10)
    want = jax.jit(jax.grad(loss))(jnp.asarray(x))  # jitted: the reference compiles once
    for g in (jax.grad(loss), jax.jit(jax.grad(loss))):
        assert_same(g(disk(x)), want, **tol)
    t = uniform(rng, -1, 1)
    _, want_t = jvp_reference(fn, jnp.asarray(x), jnp.asarray(t))
    _, got_t = jax.jvp(fn, (disk(x),), (disk(t),))
    assert_same(got_t, want_t, **tol)


@pytest.mark.parametrize("name,fn,xb,yb", BINARY, ids=[b[0] for b in BINARY])
def test_binary_values_grads_and_scalar_operands(name, fn, xb, yb, rng):
    x, y = uniform(rng, *xb), uniform(rng, *yb)
    check(fn, x, y)
    check(lambda a: fn(a, 1.5), x)
    check(lambda b: fn(2.5, b), y)
    w = jnp.asarray(uniform(rng, -1, 1))

    def loss(a, b):
        return jnp.sum(fn(a, b) * w)

    want = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(y))
    for g in (jax.grad(loss, argnums=(0, 1)), jax.jit(jax.grad(loss, argnums=(0, 1)))):
        for got, exp in zip(g(disk(x), disk(y)), want):
            assert_same(got, exp, rtol=1e-5, atol=1e-5)
    t = (uniform(rng, -1, 1), uniform(rng, -1, 1))
    _, want_t = jax.jvp(fn, (jnp.asarray(x), jnp.asarray(y)), tuple(map(jnp.asarray, t)))
    _, got_t = jax.jvp(fn, (disk(x), disk(y)), tuple(map(disk, t)))
    assert_same(got_t, want_t, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", COMPARISONS, ids=lambda f: f.__name__)
def test_comparisons_give_bool_on_every_dtype(fn, rng):
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16, np.int32):
        x = np.round(uniform(rng, -3, 3)).astype(dtype)
        y = np.round(uniform(rng, -3, 3)).astype(dtype)
        check(fn, x, y)
        check(lambda a: fn(a, 1), x)


def test_max_min_and_relu_propagate_nan():
    x = np.array([np.nan, -1, 2, np.nan, 0], np.float32)
    y = np.array([1, np.nan, 3, np.nan, -0.0], np.float32)
    check(jnp.maximum, x, y)
    check(jnp.minimum, x, y)
    check(jax.nn.relu, x)
    check(lambda a: lax.clamp(-0.5, a, 1.0), x)


def test_nextafter_in_each_float_dtype():
    x = np.array([1, 1, 0, -0.0, 3, np.nan], np.float32)
    y = np.array([2, 0, 1, -1, 3, 1], np.float32)
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
        check(jnp.nextafter, x.astype(dtype), y.astype(dtype), rtol=0, atol=0)


def test_clamp_values_and_gradients(rng):
    x = uniform(rng, -2, 2)
    lo, hi = uniform(rng, -1.5, 0), uniform(rng, 0, 1.5)
    check(lax.clamp, lo, x, hi)
    check(lambda a: lax.clamp(np.float32(-1), a, np.float32(1)), x)
    check(lambda a: jnp.clip(a, -1, 1.5), x)

    def loss(a, b, c):
        return jnp.sum(lax.clamp(a, b, c) * jnp.arange(x.size, dtype=jnp.float32).reshape(SHAPE))

    want = jax.grad(loss, argnums=(0, 1, 2))(*map(jnp.asarray, (lo, x, hi)))
    for got, exp in zip(jax.grad(loss, argnums=(0, 1, 2))(*map(disk, (lo, x, hi))), want):
        assert_same(got, exp, rtol=1e-5)


def test_is_finite_and_isnan(rng):
    x = uniform(rng, -3, 3)
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[::11] = np.inf
    x.reshape(-1)[::13] = -np.inf
    check(jnp.isfinite, x)
    check(jnp.isnan, x)
    check(jnp.isinf, x)


# -- int32 as XLA computes it ----------------------------------------------------------

EDGES = np.array(
    [0, 1, -1, 7, -7, 2, -2, 31, 32, 33, -32, I32.max, I32.min, 46341, 65536], np.int32
)


def int_pairs(rng):
    """Every pair of the edge values, then random ones, shaped like SHAPE's first rows."""
    a, b = np.meshgrid(EDGES, EDGES)
    extra = rng.integers(I32.min, I32.max, (2, 4096 - a.size), dtype=np.int64).astype(np.int32)
    return np.concatenate([a.ravel(), extra[0]]), np.concatenate([b.ravel(), extra[1]])


INT_BINARY = [
    lax.add,
    lax.sub,
    lax.mul,
    lax.div,
    lax.rem,
    lax.max,
    lax.min,
    lax.bitwise_and,
    lax.bitwise_or,
    lax.bitwise_xor,
    lax.shift_left,
    lax.shift_right_logical,
    lax.shift_right_arithmetic,
    jnp.floor_divide,
    jnp.remainder,
    jnp.power,
]


@pytest.mark.parametrize("fn", INT_BINARY, ids=lambda f: f.__name__)
def test_int32_binary_primitives_wrap_and_match_xla_at_the_edges(fn, rng):
    a, b = int_pairs(rng)
    if fn is jnp.power:
        a, b = a % 7, np.abs(b) % 9  # jnp.power of ints: a loop of shifts, ands and selects
    check(fn, a, b)


@pytest.mark.parametrize(
    "fn",
    [lax.neg, lax.abs, lax.sign, lax.square, lax.bitwise_not, lambda x: x**3, lambda x: x * 7],
    ids=["neg", "abs", "sign", "square", "not", "cube", "times_7"],
)
def test_int32_unary_primitives_wrap(fn, rng):
    a, _ = int_pairs(rng)
    check(fn, a)


def test_bool_logic_and_arithmetic(rng):
    p, q = uniform(rng, -1, 1) > 0, uniform(rng, -1, 1) > 0.3
    check(jnp.logical_and, p, q)
    check(jnp.logical_or, p, q)
    check(jnp.logical_xor, p, q)
    check(jnp.logical_not, p)
    check(lambda a, b: a & b | ~a ^ b, p, q)
    check(lambda a, b: a + b, p, q)  # jnp: or
    check(lambda a, b: a * b, p, q)  # jnp: and
    check(lambda a, b: jnp.maximum(a, b), p, q)
    check(lambda a: a.astype(jnp.int32) * 3 - 1, p)
    check(lambda a: a.astype(jnp.float16) + 0.5, p)


def test_conversions_as_xla_on_cpu():
    f = np.array(
        [np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 2147483520.0, -0.0, 0.4], np.float32
    )
    for src in (np.float32, np.float16, ml_dtypes.bfloat16):
        with np.errstate(over="ignore"):
            x = f.astype(src)
        for dst in (np.int32, np.bool_, np.float32, np.float16, ml_dtypes.bfloat16):
            check(lambda a, dst=dst: a.astype(dst), x, rtol=0, atol=0)
    i = np.array([0, 1, -1, I32.max, I32.min, 16777217, 65519, 65520, -70000], np.int32)
    for dst in (np.float32, np.float16, ml_dtypes.bfloat16, np.bool_):
        check(lambda a, dst=dst: a.astype(dst), i, rtol=0, atol=0)


def test_convert_element_type_is_linear_between_floats_and_cuts_at_ints(rng):
    x = uniform(rng, -3, 3)

    def loss(v):
        return jnp.sum(v.astype(jnp.float16).astype(jnp.float32) * 2 + v.astype(jnp.int32) * v)

    assert_same(jax.grad(loss)(disk(x)), jax.grad(loss)(jnp.asarray(x)))


# -- float16 and bfloat16: computed in float32, rounded after each primitive -------------


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_narrow_floats_round_after_every_primitive(dtype, rng):
    x = uniform(rng, 0.5, 2).astype(dtype)
    y = uniform(rng, 0.5, 2).astype(dtype)
    for fn in (
        lambda a, b: (a * 3.3 + b) * 0.7 - a / b,
        lambda a, b: jnp.sqrt(a) * jnp.exp(b) + jnp.sin(a * b),
        lambda a, b: jnp.where(a > b, a + 1e-3, b - 1e-3),
    ):
        check(fn, x, y, rtol=0, atol=0)


def test_float64_under_x64(rng):
    with jax.enable_x64(True):
        x = rng.uniform(0.1, 3, SHAPE)
        y = rng.uniform(0.1, 3, SHAPE)
        check(lambda a, b: jnp.log(a) * b**1.5 + jnp.arctan2(a, b), x, y, rtol=1e-13, atol=1e-13)
        check(lambda a: (a * 1e3).astype(jnp.int32), x)


# -- select_n, integer_pow, budgets, fusion and errors ------------------------------------


def test_select_n_with_bool_and_int32_predicates(rng):
    x, y = uniform(rng, -1, 1), uniform(rng, -1, 1)
    check(lambda a, b: lax.select_n(a > 0, a, b), x, y)
    which = (np.abs(np.round(uniform(rng, -3, 3))) % 3).astype(np.int32)
    check(lambda w, a: lax.select_n(w, a, a * 2, a * 3), which, x)
    check(lambda a: jnp.where(a > 0.5, 1.0, a), x)


@pytest.mark.parametrize("budget", ["4KB", "64KB"])
def test_many_blocks_and_fused_dtype_changes(budget, small_budget, rng):
    small_budget(budget)
    x = uniform(rng, -50, 50)
    i = rng.integers(-1000, 1000, SHAPE).astype(np.int32)

    def chain(a, n):
        k = (a * 3).astype(jnp.int32) // 7 + n % 5  # int32 inside the fused pass
        h = (a.astype(jnp.float16) * 1.1).astype(jnp.float32)  # float16 rounding inside it
        return jnp.where(k > 0, h, jnp.sqrt(jnp.abs(a))) + k.astype(jnp.float32)

    check(chain, x, i)


def test_fused_int32_programs_are_one_pass(rng):
    i = rng.integers(-1000, 1000, SHAPE).astype(np.int32)

    def f(n):  # jnp's // and % are jitted functions of their own: lax here, for one pass
        k = lax.div(lax.add(lax.mul(n, 3), 1), 2)
        return lax.mul(lax.convert_element_type(k, jnp.float32), 0.5)

    text = jax.jit(f).lower(disk(i)).as_text()
    assert text.count("jask_array_op") == 1, text
    check(f, i)


def test_mismatched_dtypes_are_type_errors_naming_both(rng):
    x = disk(uniform(rng, -1, 1))
    n = disk(rng.integers(0, 5, SHAPE).astype(np.int32))
    with pytest.raises(TypeError, match="float32.*int32"):
        lax.add(x, n)
    with pytest.raises(TypeError, match="int32"):
        lax.sin(n)
    with pytest.raises(TypeError, match="float32"):
        lax.shift_left(x, x)


def test_division_by_zero_and_int_true_division(rng):
    x = np.round(uniform(rng, -3, 3))
    check(lambda a: a / 0, x)
    check(lambda a: a // 0, x)
    check(lambda a: a % 0, x)
    n = rng.integers(-9, 9, SHAPE).astype(np.int32)
    check(lambda a: a / a, n)
    check(lambda a: a // 0, n)
    check(lambda a: a % 0, n)


def test_every_unary_primitive_under_a_budget_of_many_blocks(small_budget, rng):
    small_budget("4KB")  # blocks of a few hundred elements: ten or more per op
    for name, fn, bounds in UNARY:
        x = uniform(rng, *bounds)
        want = fn(jnp.asarray(x))
        assert_same(jax.jit(fn)(disk(x)), want, atol=LOOSE.get(name, 1e-6))


# XLA expands these into several float16/bfloat16 operations (chlo decompositions, its
# own approximations), each rounded; Jask computes them in float32 and rounds once.
EXPANDED_BY_XLA = {
    "asin",
    "acos",
    "asinh",
    "acosh",
    "atanh",
    "expm1",
    "lgamma",
    "digamma",
    "erf_inv",
}


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_every_unary_primitive_on_narrow_floats(dtype, rng):
    ulp = 2.0**-10 if dtype == np.float16 else 2.0**-7
    for name, fn, bounds in UNARY:
        x = uniform(rng, *bounds).astype(dtype)
        want = fn(jnp.asarray(x))
        if name in EXPANDED_BY_XLA:
            assert_same(fn(disk(x)), want, rtol=2 * ulp, atol=LOOSE.get(name, 0) * 100)
        else:
            assert_same(fn(disk(x)), want, rtol=0, atol=0)
