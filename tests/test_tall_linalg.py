"""QR and SVD of tall DiskArrays too large for memory (TSQR, jask/_api/tall_linalg.py), and the
jax.numpy functions built on them (lstsq, pinv, matrix_rank, norm, cond, PCA): values, dtypes and
gradients against the same function of the in-memory array, eagerly and under jax.jit, with
budgets that cut the rows into 8 or more blocks (and the rows not a multiple of a block)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask._api import tall_linalg

from conftest import DEFAULT_BUDGET, assert_close

M, N = 3001, 6  # 13 blocks of 250 rows under 128KB: the last one a single row
BUDGET = "128KB"


@pytest.fixture
def small():
    jask.set_memory_budget(BUDGET)
    yield
    jask.set_memory_budget(DEFAULT_BUDGET)


@pytest.fixture(scope="module")
def a():
    rng = np.random.default_rng(0)
    # columns of different scales: a condition number near 100
    return (rng.standard_normal((M, N)) * np.geomspace(1, 100, N)).astype(np.float32)


@pytest.fixture(scope="module")
def y():
    return np.random.default_rng(1).standard_normal(M).astype(np.float32)


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def value(x):
    return np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)


def check(actual, expected, rtol=2e-4, on_disk=None):
    """Leaves of the same shape and dtype, close to the reference; `on_disk`: which leaves are
    DiskArrays (the others in-memory jax.Arrays)."""
    actual, expected = jax.tree.leaves(actual), jax.tree.leaves(expected)
    assert len(actual) == len(expected)
    for i, (got, want) in enumerate(zip(actual, expected)):
        if on_disk is not None:
            assert isinstance(got, jask.DiskArray) == on_disk[i], (i, type(got))
        got, want = value(got), np.asarray(want)
        assert got.dtype == want.dtype, (i, got.dtype, want.dtype)
        assert got.shape == want.shape, (i, got.shape, want.shape)
        assert_close(got, want, rtol=rtol)


def test_the_rows_take_many_blocks(small, a):
    """The shapes here exercise the out-of-core route: too large for the in-memory one, 8 or
    more row blocks, the last one shorter."""
    allowance = jask.memory_budget() // 2
    assert a.nbytes > allowance
    block = tall_linalg._row_block(M, N, 4, 3 * (allowance // 4))
    assert M // block >= 8 and M % block != 0
    assert len(tall_linalg.TSQR(disk(a), signs=False).groups) == 1  # one stack of R factors


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_qr_is_lapacks(small, a, jit):
    """Q (a DiskArray) and R (in memory) are jnp.linalg.qr's, signs included."""
    f = jax.jit(jnp.linalg.qr) if jit else jnp.linalg.qr
    q, r = f(disk(a))
    check((q, r), jnp.linalg.qr(a), on_disk=[True, False])
    q = value(q).astype(np.float64)
    assert_close(q.T @ q, np.eye(N), rtol=1e-5)
    assert_close(q @ np.asarray(r, np.float64), a, rtol=1e-5)


def test_qr_r_only(small, a):
    check(jnp.linalg.qr(disk(a), mode="r"), jnp.linalg.qr(a, mode="r"), on_disk=[False])


def test_qr_two_levels():
    """Too many blocks for one stack of R factors in memory: groups of blocks, each group's R
    factors stacked, then the groups'."""
    jask.set_memory_budget("24KB")
    try:
        b = np.random.default_rng(3).standard_normal((300, 8)).astype(np.float32)
        check(jnp.linalg.qr(disk(b)), jnp.linalg.qr(b), on_disk=[True, False])
        factor = tall_linalg.TSQR(disk(b))
        assert len(factor.groups) >= 2
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)


def test_qr_of_a_wide_matrix(small, a):
    """m < n: the QR of the first m columns, R = Q^T A streamed (a DiskArray)."""
    wide = np.ascontiguousarray(a.T)
    check(jnp.linalg.qr(disk(wide)), jnp.linalg.qr(wide), on_disk=[False, True])


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_svd_of_a_tall_matrix(small, a, jit):
    f = lambda x: jnp.linalg.svd(x, full_matrices=False)  # noqa: E731
    u, s, vt = (jax.jit(f) if jit else f)(disk(a))
    check((u, s, vt), f(a), on_disk=[True, False, False])


def test_singular_values_only(small, a):
    check(jnp.linalg.svd(disk(a), compute_uv=False), jnp.linalg.svd(a, compute_uv=False))


def test_svd_of_a_wide_matrix(small, a):
    """Through the transpose; the singular vectors' signs may differ from jnp's (LAPACK's
    choice for a wide matrix): U s Vt is the matrix, U and Vt orthonormal, s jnp's."""
    wide = np.ascontiguousarray(a.T)
    u, s, vt = jnp.linalg.svd(disk(wide), full_matrices=False)
    u_j, s_j, vt_j = jnp.linalg.svd(wide, full_matrices=False)
    assert isinstance(vt, jask.DiskArray) and not isinstance(u, jask.DiskArray)
    check(s, s_j)
    u, vt = value(u).astype(np.float64), value(vt).astype(np.float64)
    assert_close(np.abs(u), np.abs(u_j), rtol=2e-4)
    assert_close(np.abs(vt), np.abs(vt_j), rtol=2e-4)
    assert_close((u * value(s)) @ vt, wide, rtol=1e-5)
    assert_close(vt @ vt.T, np.eye(N), rtol=1e-5)


def test_pca(small, a):
    """PCA as written for in-memory arrays: the SVD of the centred data."""
    f = lambda x: jnp.linalg.svd(x - x.mean(0), full_matrices=False)  # noqa: E731
    check(f(disk(a)), f(a), on_disk=[True, False, False])


def test_pca_by_the_gram_matrix(small, a):
    """PCA by eigh of the covariance, as written for in-memory arrays: the n x n Gram matrix is a
    streamed product, eigh runs in memory on it; eigenvalues, |eigenvectors| (their signs are
    LAPACK's choice) and the gradient of the eigenvalues' sum, eagerly and jitted."""

    def pca(x):
        xc = x - x.mean(axis=0)
        w, v = jnp.linalg.eigh(xc.T @ xc / x.shape[0])
        return w, jnp.abs(v)

    want = pca(jnp.asarray(a))
    check(pca(disk(a)), want, rtol=1e-3, on_disk=[False, False])
    check(jax.jit(pca)(disk(a)), want, rtol=1e-3)
    loss = lambda x: pca(x)[0].sum()  # noqa: E731
    check(jax.grad(loss)(disk(a)), jax.grad(loss)(jnp.asarray(a)), on_disk=[True])


@pytest.mark.parametrize(
    "name",
    ["lstsq", "lstsq_disk_y", "pinv", "matrix_rank", "norm2", "nuc", "cond"],
)
def test_functions_built_on_the_svd(small, a, y, name):
    functions = {
        "lstsq": (lambda x, y: jnp.linalg.lstsq(x, y), False),
        "lstsq_disk_y": (lambda x, y: jnp.linalg.lstsq(x, y)[0], True),
        "pinv": (lambda x, y: jnp.linalg.pinv(x), False),
        "matrix_rank": (lambda x, y: jnp.linalg.matrix_rank(x), False),
        "norm2": (lambda x, y: jnp.linalg.norm(x, ord=2), False),
        "nuc": (lambda x, y: jnp.linalg.norm(x, ord="nuc"), False),
        "cond": (lambda x, y: jnp.linalg.cond(x), False),
    }
    f, y_on_disk = functions[name]
    check(f(disk(a), disk(y) if y_on_disk else y), jax.jit(f)(a, y), rtol=5e-4)


def _qr_loss(x):
    q, r = jnp.linalg.qr(x)
    return jnp.sum(r**2) + jnp.sum(q[:7] ** 3)


GRADIENTS = {
    "qr": _qr_loss,
    "singular_values": lambda x: jnp.sum(jnp.linalg.svd(x, compute_uv=False)),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradients(small, a, name):
    f = GRADIENTS[name]
    check(jax.grad(f)(disk(a)), jax.jit(jax.grad(f))(a), rtol=5e-4, on_disk=[True])


def test_jitted_gradient_of_a_least_squares_loss(small, a, y):
    loss = lambda x: jnp.sum((x @ jnp.linalg.lstsq(x, y)[0] - y) ** 2)  # noqa: E731
    check(jax.jit(jax.grad(loss))(disk(a)), jax.jit(jax.grad(loss))(a), rtol=5e-4, on_disk=[True])


def test_float64(small):
    with jax.enable_x64(True):
        b = np.random.default_rng(2).standard_normal((1501, 5))
        q, r = jnp.linalg.qr(disk(b))
        check((q, r), jnp.linalg.qr(b), rtol=1e-10, on_disk=[True, False])
        f = lambda x: jnp.linalg.svd(x, full_matrices=False)  # noqa: E731
        check(f(disk(b)), f(b), rtol=1e-10, on_disk=[True, False, False])


def test_full_matrices_are_refused(small, a):
    with pytest.raises(NotImplementedError, match=r"full_matrices=False.*3001 x 6"):
        jnp.linalg.svd(disk(a))
    with pytest.raises(NotImplementedError, match=r"complete Q is 3001 x 3001.*reduced"):
        jnp.linalg.qr(disk(a), mode="complete")
    with pytest.raises(NotImplementedError, match=r"pivoting=True.*float32\[3001,6\]"):
        jax.lax.linalg.qr(disk(a), pivoting=True, full_matrices=False)


def test_small_matrices_stay_in_memory(a):
    """Under the default budget the XLA route computes in memory, as before: in-memory
    results, complete modes and pivoting included."""
    x = disk(a[:50])
    q, r = jnp.linalg.qr(x, mode="complete")
    assert not isinstance(q, jask.DiskArray)
    check((q, r), jnp.linalg.qr(a[:50], mode="complete"))
    check(jnp.linalg.svd(x), jnp.linalg.svd(a[:50]))


def test_jvp(small, a):
    f = lambda x: jnp.linalg.qr(x)[1]  # noqa: E731
    t = np.random.default_rng(4).standard_normal(a.shape).astype(np.float32)
    check(jax.jvp(f, (disk(a),), (disk(t),)), jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(a, t))


def test_a_batch_of_matrices_each_too_large(a):
    """Each matrix by TSQR (matrices that each fit go block by block over the batch)."""
    jask.set_memory_budget("64KB")
    try:
        b = np.stack([a[:1001], a[1001:2002]])
        check(jnp.linalg.qr(disk(b)), jnp.linalg.qr(b), on_disk=[True, False])
        f = lambda x: jnp.linalg.svd(x, compute_uv=False)  # noqa: E731
        check(f(disk(b)), f(b))
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)
