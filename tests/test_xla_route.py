"""XLA computes the primitives Jask has no rule for (jask/_api/xla_route.py): in memory when the
DiskArray operands and results fit half the budget, block by block along an independent axis
when they do not (jask/ops/block_map.py). Every case against the same function on jax.Arrays:
values, dtypes, shapes; gradients w.r.t. DiskArrays are DiskArrays with jax.grad's values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import DEFAULT_BUDGET, assert_close


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def value(x):
    return np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)


def check(actual, expected, rtol=1e-4):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = value(a), np.asarray(e)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        assert_close(a.real, e.real, rtol=rtol)
        assert_close(a.imag, e.imag, rtol=rtol)


@pytest.fixture
def spd(rng):
    x = rng.normal(size=(7, 7)).astype(np.float32)
    return x @ x.T + 7 * np.eye(7, dtype=np.float32)


# -- rule 1: in memory when it fits ------------------------------------------------

LINALG = {
    "inv": jnp.linalg.inv,
    "cholesky": jnp.linalg.cholesky,
    "eigh": lambda m: jnp.linalg.eigh(m)[0],
    "eigvalsh": jnp.linalg.eigvalsh,
    "svd": lambda m: jnp.linalg.svd(m, compute_uv=False),
    "qr_r": lambda m: jnp.abs(jnp.linalg.qr(m)[1]),
    "det": jnp.linalg.det,
    "slogdet": lambda m: jnp.linalg.slogdet(m)[1],
    "solve": lambda m: jnp.linalg.solve(m, jnp.arange(7.0, dtype=jnp.float32)),
    "solve_matrix": lambda m: jnp.linalg.solve(m, m[:, :3]),
    "lstsq": lambda m: jnp.linalg.lstsq(m[:, :4], jnp.ones(7, jnp.float32))[0],
    "pinv": jnp.linalg.pinv,
    "triangular": lambda m: jax.scipy.linalg.solve_triangular(jnp.tril(m), jnp.ones(7)),
    "cho_solve": lambda m: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(m), jnp.ones(7)),
    "expm": lambda m: jax.scipy.linalg.expm(m / 20),
    "matrix_power": lambda m: jnp.linalg.matrix_power(m / 10, 3),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linear_algebra_of_a_small_disk_array_as_jnp(spd, name):
    fn = LINALG[name]
    d = disk(spd)
    expected = fn(jnp.asarray(spd))
    check(fn(d), expected)
    check(jax.jit(fn)(d), expected)


GRADIENTS = {
    "slogdet": lambda m: jnp.linalg.slogdet(m)[1],
    "inv": lambda m: jnp.sum(jnp.linalg.inv(m) ** 2),
    "eigh": lambda m: jnp.sum(jnp.linalg.eigh(m)[0] * jnp.arange(7.0)),
    "cholesky": lambda m: jnp.sum(jnp.linalg.cholesky(m)),
    "solve": lambda m: jnp.sum(jnp.linalg.solve(m, jnp.ones(7))),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradients_through_linear_algebra_are_disk_arrays(spd, name):
    fn = GRADIENTS[name]
    d = disk(spd)
    expected = jax.grad(fn)(jnp.asarray(spd))
    for grad in (jax.grad(fn), jax.jit(jax.grad(fn))):
        g = grad(d)
        assert isinstance(g, jask.DiskArray)
        check(g, expected, rtol=1e-3)


def test_forward_mode_and_hessian_of_a_small_disk_array(spd):
    fn = lambda m: jnp.linalg.slogdet(m)[1]  # noqa: E731
    d = disk(spd)
    t = np.eye(7, dtype=np.float32)
    _, expected = jax.jvp(fn, (jnp.asarray(spd),), (jnp.asarray(t),))
    _, tangent = jax.jvp(fn, (d,), (disk(t),))
    check(tangent, expected, rtol=1e-3)
    v = np.array([1.0, 2.0], np.float32)
    for f in (jnp.linalg.inv, lambda m: jnp.linalg.solve(m, jnp.ones(2))):
        hess = jax.hessian(lambda x: jnp.sum(f(jnp.diag(x + 3.0))))  # noqa: B023
        expected = hess(jnp.asarray(v))
        check(hess(disk(v)), expected, rtol=1e-3)  # second order through custom_linear_solve
        check(jax.jit(hess)(disk(v)), expected, rtol=1e-3)


def test_fft_of_a_small_disk_array(rng):
    x = rng.normal(size=(5, 16)).astype(np.float32)
    d = disk(x)
    for fn in (
        jnp.fft.fft,
        jnp.fft.rfft,
        lambda v: jnp.fft.fft2(v),
        lambda v: jnp.abs(jnp.fft.ifft(v)),
    ):
        check(fn(d), fn(jnp.asarray(x)))
    loss = lambda v: jnp.sum(jnp.abs(jnp.fft.rfft(v)) ** 2)  # noqa: E731
    check(jax.grad(loss)(d), jax.grad(loss)(jnp.asarray(x)), rtol=1e-3)


def _conv(x, w):
    return jax.lax.conv_general_dilated(
        x, w, (1, 2), "SAME", rhs_dilation=(1, 1), dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _max_pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _avg_pool(x):
    return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9


def _cnn_loss(x, w):
    return jnp.sum(_avg_pool(_max_pool(jax.nn.relu(_conv(x, w)))) ** 2)


@pytest.mark.parametrize("on_disk", ["x", "w", "both"])
def test_convolution_and_pooling_of_small_disk_arrays(rng, on_disk):
    x = rng.normal(size=(3, 9, 10, 2)).astype(np.float32)
    w = rng.normal(size=(3, 3, 2, 4)).astype(np.float32)
    dx = disk(x) if on_disk in ("x", "both") else jnp.asarray(x)
    dw = disk(w) if on_disk in ("w", "both") else jnp.asarray(w)
    check(_conv(dx, dw), _conv(jnp.asarray(x), jnp.asarray(w)))
    check(jax.jit(_cnn_loss)(dx, dw), _cnn_loss(jnp.asarray(x), jnp.asarray(w)))
    grads = jax.grad(_cnn_loss, argnums=(0, 1))(dx, dw)
    expected = jax.grad(_cnn_loss, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    for g, e, operand in zip(grads, expected, (dx, dw)):
        assert isinstance(g, jask.DiskArray) == isinstance(operand, jask.DiskArray)
        check(g, e, rtol=1e-3)


def test_special_functions_and_bit_ops_of_disk_arrays(rng):
    a = rng.uniform(0.5, 3.0, size=(4, 5)).astype(np.float32)
    i = rng.integers(0, 1000, size=(4, 5)).astype(np.int32)
    da, di = disk(a), disk(i)
    cases = [
        (lambda v: jax.scipy.special.gammainc(v, 1.5), da, a),
        (lambda v: jax.scipy.special.zeta(v + 1.0, 2.0), da, a),
        (lambda v: jax.scipy.special.i0e(v), da, a),
        (lambda v: jax.scipy.special.betainc(v, 2.0, 0.3), da, a),
        (lambda v: jax.lax.population_count(v), di, i),
        (lambda v: jax.lax.clz(v), di, i),
        (lambda v: jax.lax.reduce_precision(v, 5, 10), da, a),
        (lambda v: jax.lax.bitcast_convert_type(v, jnp.int32), da, a),
    ]
    for fn, d, x in cases:
        check(fn(d), fn(jnp.asarray(x)))
        check(jax.jit(fn)(d), fn(jnp.asarray(x)))


def test_custom_linear_solve_with_a_disk_array_operator(spd):
    d = disk(spd)
    b = jnp.arange(7.0, dtype=jnp.float32)

    def solve(m, b):
        matvec = lambda v: m @ v  # noqa: E731
        return jax.lax.custom_linear_solve(
            matvec, b, lambda mv, r: jnp.linalg.solve(m, r), symmetric=True
        )

    check(solve(d, b), solve(jnp.asarray(spd), b))
    loss = lambda m: jnp.sum(solve(m, b))  # noqa: E731
    check(jax.grad(loss)(d), jax.grad(loss)(jnp.asarray(spd)), rtol=1e-3)


def test_a_matrix_vector_product_has_the_type_of_the_vector(spd):
    d = disk(spd)
    v = jnp.ones(7, jnp.float32)
    assert not isinstance(d @ v, jask.DiskArray)
    assert isinstance(d @ disk(np.ones(7, np.float32)), jask.DiskArray)
    check(d @ v, jnp.asarray(spd) @ v)


# -- rule 2: block by block when it does not fit -----------------------------------


@pytest.fixture
def budget_16kb():
    jask.set_memory_budget("16KB")
    yield
    jask.set_memory_budget(DEFAULT_BUDGET)


def test_convolution_streams_batch_blocks_through_xla(rng, budget_16kb):
    x = rng.normal(size=(37, 8, 9, 3)).astype(np.float32)  # 32 KB: over half the budget
    w = rng.normal(size=(3, 3, 3, 2)).astype(np.float32)
    dx = disk(x)
    out = _conv(dx, w)
    assert isinstance(out, jask.DiskArray)
    check(out, _conv(jnp.asarray(x), jnp.asarray(w)))
    check(jax.jit(_conv)(dx, w), _conv(jnp.asarray(x), jnp.asarray(w)))


def test_gradients_of_a_streamed_cnn_as_jax(rng, budget_16kb):
    x = rng.normal(size=(29, 8, 8, 2)).astype(np.float32)
    w = rng.normal(size=(3, 3, 2, 2)).astype(np.float32)
    dx, dw = disk(x), disk(w)

    def loss(x, w):
        return jnp.sum(_max_pool(jnp.tanh(_conv(x, w))) ** 2)

    expected = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    for grad in (jax.grad(loss, argnums=(0, 1)), jax.jit(jax.grad(loss, argnums=(0, 1)))):
        gx, gw = grad(dx, dw)
        assert isinstance(gx, jask.DiskArray) and isinstance(gw, jask.DiskArray)
        check(gx, expected[0], rtol=1e-3)
        check(gw, expected[1], rtol=1e-3)


def test_forward_mode_through_a_streamed_convolution(rng, budget_16kb):
    x = rng.normal(size=(23, 8, 8, 2)).astype(np.float32)
    w = rng.normal(size=(3, 3, 2, 2)).astype(np.float32)
    t = rng.normal(size=x.shape).astype(np.float32)
    fn = lambda v: _conv(v, jnp.asarray(w))  # noqa: E731
    _, expected = jax.jvp(fn, (jnp.asarray(x),), (jnp.asarray(t),))
    _, tangent = jax.jvp(fn, (disk(x),), (disk(t),))
    check(tangent, expected, rtol=1e-3)


@pytest.mark.parametrize(
    "dn, groups", [(("NCHW", "OIHW", "NCHW"), 2), (("NHWC", "HWIO", "NHWC"), 3)]
)
def test_a_batch_grouped_convolution_streams(rng, budget_16kb, dn, groups):
    # batch_group_count=G: the result's row b reads row b of each of lhs's G batch groups
    # (lax_test testConvGeneralDilated0 at 64KB)
    if dn[0] == "NCHW":
        x = rng.normal(size=(groups * 13, 3, 9, 7)).astype(np.float32)
        w = rng.normal(size=(2 * groups, 3, 4, 5)).astype(np.float32)
    else:
        x = rng.normal(size=(groups * 13, 9, 7, 3)).astype(np.float32)
        w = rng.normal(size=(4, 5, 3, 2 * groups)).astype(np.float32)
    assert x.nbytes > 16 * 1024  # more than the budget: in blocks

    def fn(x, w):
        return jax.lax.conv_general_dilated(
            x, w, (1, 2), "SAME", dimension_numbers=dn, batch_group_count=groups
        )

    expected = fn(jnp.asarray(x), jnp.asarray(w))
    for f in (fn, jax.jit(fn)):
        out = f(disk(x), jnp.asarray(w))
        assert isinstance(out, jask.DiskArray)
        check(out, expected)
    loss = lambda x, w: jnp.sum(fn(x, w) ** 2)  # noqa: E731
    expected = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(disk(x), jnp.asarray(w))
    assert isinstance(gx, jask.DiskArray)
    check(gx, expected[0], rtol=1e-3)
    check(gw, expected[1], rtol=1e-3)


def test_batched_linear_algebra_and_fft_stream(rng, budget_16kb):
    x = rng.normal(size=(300, 4, 4)).astype(np.float32)
    spd = x @ np.swapaxes(x, -1, -2) + 4 * np.eye(4, dtype=np.float32)
    d = disk(spd)
    out = jnp.linalg.cholesky(d)
    assert isinstance(out, jask.DiskArray)
    check(out, jnp.linalg.cholesky(jnp.asarray(spd)))
    check(jax.jit(jnp.linalg.eigvalsh)(d), jnp.linalg.eigvalsh(jnp.asarray(spd)), rtol=1e-3)
    s = rng.normal(size=(400, 16)).astype(np.float32)
    check(jnp.abs(jnp.fft.rfft(disk(s))), jnp.abs(jnp.fft.rfft(jnp.asarray(s))))


def test_special_functions_stream_elementwise(rng, budget_16kb):
    a = rng.uniform(0.5, 3.0, size=(101, 57)).astype(np.float32)
    fn = lambda v: jax.scipy.special.gammainc(v, 1.5)  # noqa: E731
    out = fn(disk(a))
    assert isinstance(out, jask.DiskArray)
    check(out, fn(jnp.asarray(a)))
    loss = lambda v: jnp.sum(jax.scipy.special.i0e(v))  # noqa: E731
    check(jax.grad(loss)(disk(a)), jax.grad(loss)(jnp.asarray(a)), rtol=1e-3)


def test_a_primitive_neither_fitting_nor_independent_names_the_budget(rng, budget_16kb):
    m = rng.normal(size=(80, 80)).astype(np.float32)
    with pytest.raises(NotImplementedError, match=r"cholesky.*budget"):
        jnp.linalg.cholesky(disk(m))


def test_jax_only_code_is_untouched():
    x = jnp.ones((3, 3))
    check(
        jnp.linalg.inv(x + jnp.eye(3)),
        np.linalg.inv(np.ones((3, 3)) + np.eye(3)).astype(np.float32),
    )


@pytest.mark.parametrize("budget", [DEFAULT_BUDGET, 16 * 1024])
def test_random_sampling_with_disk_array_parameters_as_jax(budget):
    # a PRNG key beside a DiskArray operand: the key's extended dtype is not a NumPy dtype
    # (xla_computes raised TypeError on it)
    lam = np.linspace(0.5, 8, 1001).astype(np.float32)
    key = jax.random.key(3)
    expected = jax.random.poisson(key, jnp.asarray(lam))
    jask.set_memory_budget(budget)
    try:
        got = jax.random.poisson(key, disk(lam))
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(value(got), np.asarray(expected))
