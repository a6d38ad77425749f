"""Client programs of classical numerics and science written as their authors write them (PCA by
eigh and by svd, ridge regression, k-means, GMM EM, a diffrax neural ODE, lineax solves, notebook
habits) on DiskArray data at a small budget, against the same programs on jax.Arrays
(tests/test_client_programs.py has the neural nets and the helpers)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax
from test_client_programs import BUDGET, RTOL, assert_on_disk, disk, disk_tree, images

import jask

from conftest import assert_trees_match


@pytest.fixture(autouse=True)
def small_blocks(small_budget):
    small_budget(BUDGET)


# ---------------------------------------------------------------------------------------------
# Classical methods on a DiskArray data matrix: PCA (eigh, svd), ridge, k-means, GMM EM


def data_matrix(n=300, d=10, seed=13):
    rng = np.random.default_rng(seed)
    # Well separated spectrum: eigenvectors are determined up to sign.
    scales = np.linspace(3.0, 0.3, d).astype(np.float32)
    return (rng.normal(size=(n, d)).astype(np.float32) * scales) @ np.linalg.qr(
        rng.normal(size=(d, d))
    )[0].astype(np.float32)


def align_signs(vectors, reference):
    """Columns of `vectors` flipped to agree in sign with `reference`'s (eigenvectors and
    singular vectors are determined up to sign)."""
    signs = np.sign(np.sum(np.asarray(vectors) * np.asarray(reference), axis=0))
    return np.asarray(vectors) * signs


def test_pca_by_covariance_eigh():
    X_np = data_matrix()

    def pca(X, k=3):
        X_centered = X - jnp.mean(X, axis=0, keepdims=True)
        cov = X_centered.T @ X_centered / (X.shape[0] - 1)
        eigvals, eigvecs = jnp.linalg.eigh(cov)
        order = jnp.argsort(eigvals)[::-1]
        eigvals, eigvecs = eigvals[order], eigvecs[:, order]
        explained = eigvals / jnp.sum(eigvals)
        return eigvals, eigvecs[:, :k], explained, X_centered @ eigvecs[:, :k]

    vals, vecs, explained, proj = pca(disk(X_np))
    ref_vals, ref_vecs, ref_explained, ref_proj = pca(jnp.asarray(X_np))
    assert_trees_match((vals, explained), (ref_vals, ref_explained), RTOL)
    assert_trees_match(align_signs(vecs, ref_vecs), np.asarray(ref_vecs), 1e-3)
    assert_trees_match(align_signs(proj, ref_proj), np.asarray(ref_proj), 1e-3)


def test_pca_by_svd():
    X_np = data_matrix(seed=14)

    @jax.jit
    def pca(X):
        X_centered = X - X.mean(axis=0)
        U, S, Vt = jnp.linalg.svd(X_centered, full_matrices=False)
        return S, Vt, U[:, :2] * S[:2]

    S, Vt, scores = pca(disk(X_np))
    ref_S, ref_Vt, ref_scores = pca(jnp.asarray(X_np))
    assert_trees_match(S, ref_S, RTOL)
    assert_trees_match(align_signs(np.asarray(Vt).T, ref_Vt.T), np.asarray(ref_Vt).T, 1e-3)
    assert_trees_match(align_signs(scores, ref_scores), np.asarray(ref_scores), 1e-3)


def test_ridge_regression_closed_form_and_grad():
    X_np = data_matrix(seed=15)
    w_true = np.arange(10, dtype=np.float32) / 10
    y_np = X_np @ w_true + 0.01 * images((300,), seed=16)

    def ridge(X, y, lam=0.5):
        A = X.T @ X + lam * jnp.eye(X.shape[1], dtype=X.dtype)
        return jnp.linalg.solve(A, X.T @ y)

    def validation_loss(X, y):
        w = ridge(X[:200], y[:200])
        return jnp.mean((X[200:] @ w - y[200:]) ** 2)

    out = (
        jax.jit(ridge)(disk(X_np), disk(y_np)),
        jax.value_and_grad(validation_loss)(disk(X_np), disk(y_np)),
    )
    ref = (
        jax.jit(ridge)(X_np, y_np),
        jax.value_and_grad(validation_loss)(jnp.asarray(X_np), jnp.asarray(y_np)),
    )
    assert_trees_match(out, ref, 1e-3)
    assert_on_disk(out[1][1], "grad")


def test_kmeans_lloyd_in_fori_loop():
    rng = np.random.default_rng(17)
    centers = np.asarray([[0, 0], [5, 5], [-5, 5], [5, -5]], np.float32)
    X_np = (centers[rng.integers(0, 4, 400)] + rng.normal(size=(400, 2))).astype(np.float32)

    @jax.jit
    def kmeans(X, k=4, iters=6):
        def step(_, centroids):
            d2 = (
                jnp.sum(X**2, axis=1, keepdims=True)
                - 2 * X @ centroids.T
                + jnp.sum(centroids**2, axis=1)[None, :]
            )
            assign = jnp.argmin(d2, axis=1)
            one_hot = jax.nn.one_hot(assign, k, dtype=X.dtype)
            counts = one_hot.sum(axis=0)
            return (one_hot.T @ X) / jnp.maximum(counts, 1)[:, None]

        centroids = lax.fori_loop(0, iters, step, X[:k])
        assign = jnp.argmin(jnp.linalg.norm(X[:, None, :] - centroids[None], axis=-1), axis=1)
        inertia = jnp.sum((X - centroids[assign]) ** 2)
        return centroids, assign, inertia

    out = kmeans(disk(X_np))
    ref = kmeans(jnp.asarray(X_np))
    assert_trees_match(out, ref, RTOL)


def test_gmm_expectation_maximization():
    rng = np.random.default_rng(18)
    X_np = np.concatenate([rng.normal(-2, 0.5, (150, 3)), rng.normal(2, 1.0, (150, 3))]).astype(
        np.float32
    )

    def log_gaussian(X, means, variances):
        diff = X[:, None, :] - means[None, :, :]
        return -0.5 * jnp.sum(
            diff**2 / variances[None] + jnp.log(2 * jnp.pi * variances[None]), axis=-1
        )

    @jax.jit
    def em(X, iters=4):
        k = 2
        means, variances, weights = (
            X[jnp.array([0, 299])],
            jnp.ones((k, X.shape[1])),
            jnp.full(k, 0.5),
        )
        log_likelihoods = []
        for _ in range(iters):
            log_p = log_gaussian(X, means, variances) + jnp.log(weights)
            log_norm = jax.scipy.special.logsumexp(log_p, axis=1, keepdims=True)
            resp = jnp.exp(log_p - log_norm)
            log_likelihoods.append(jnp.sum(log_norm))
            nk = resp.sum(axis=0)
            weights = nk / X.shape[0]
            means = (resp.T @ X) / nk[:, None]
            variances = (resp.T @ X**2) / nk[:, None] - means**2 + 1e-6
        return means, variances, weights, jnp.stack(log_likelihoods)

    out = em(disk(X_np))
    ref = em(jnp.asarray(X_np))
    assert_trees_match(out, ref, 1e-3)


# ---------------------------------------------------------------------------------------------
# Notebook habits on a DiskArray


def test_notebook_habits():
    X_np = data_matrix(n=200, d=6, seed=19)
    params_np = {"w": images((6, 4), seed=20), "b": images((4,), seed=21)}

    def explore(X, params):
        out = {}
        print(X.shape, X.dtype)
        out["mean"] = jnp.mean(X, axis=0, keepdims=True)
        out["std"] = X.std(axis=0)
        standardized = (X - out["mean"]) / out["std"]
        out["row_none"] = standardized[None].sum(axis=1)
        out["col_none"] = (X[..., None] * params["w"][None]).sum(axis=1)
        positive = X[:, 0] > 0
        out["masked_count"] = positive.sum()
        out["masked_mean"] = jnp.where(positive[:, None], X, 0).sum(axis=0) / positive.sum()
        out["order"] = jnp.argsort(X[:, 1])
        out["sorted"] = X[out["order"], 1]
        out["einsum"] = jnp.einsum("ni,ij,j,nk->k", X, params["w"], params["b"], X)
        out["scaled"] = jax.tree.map(lambda p: 0.5 * p + 1.0, params)
        out["norms"] = jax.tree.map(jnp.linalg.norm, params)
        out["top"] = lax.top_k(X[:, 2], 5)
        out["clip"] = jnp.clip(X, -1, 1).block_until_ready()
        return out

    out = explore(disk(X_np), disk_tree(params_np))
    ref = explore(jnp.asarray(X_np), jax.tree.map(jnp.asarray, params_np))
    assert_trees_match(out, ref, RTOL)
    np.testing.assert_array_equal(np.asarray(out["order"]), np.asarray(ref["order"]))
    assert np.asarray(out["mean"]).shape == (1, 6)


def test_notebook_boolean_mask_selection():
    """Eagerly, jnp selects rows by a concrete boolean mask (a data-dependent shape)."""
    X_np = data_matrix(n=200, d=6, seed=22)

    def select(X):
        keep = X[:, 0] > 0
        return X[keep], X[keep, 1:3].mean(axis=0), jnp.where(keep)[0]

    assert_trees_match(select(disk(X_np)), select(jnp.asarray(X_np)), RTOL)


# ---------------------------------------------------------------------------------------------
# diffrax neural ODE and lineax solves


# The root causes the diffrax fit met (with test_loop_carries.py's
# test_a_body_traced_once_for_a_diskarray_runs_on_an_in_memory_carry)


def test_derivative_of_where_whose_only_diskarray_has_a_zero_tangent():
    """jnp.where(mask, a, d) with a in memory and d a DiskArray constant: the tangent is the
    op on (a's tangent, d's zero), which must still have a DiskArray operand; a's cotangent
    (from the DiskArray one) is read into memory, a's type."""
    rng = np.random.default_rng(31)
    a_np, d_np = rng.normal(size=(2, 50, 3)).astype(np.float32)
    mask = jnp.asarray(rng.normal(size=(50, 3)) > 0)

    def f(a, d):
        return jnp.sum(jnp.where(mask, a, d) ** 2)

    def derivatives(d):
        a, t = jnp.asarray(a_np), jnp.ones((50, 3), jnp.float32)
        return jax.jvp(lambda a: f(a, d), (a,), (t,)), jax.grad(f)(a, d)

    got, ref = derivatives(disk(d_np)), derivatives(jnp.asarray(d_np))
    assert_trees_match(got, ref, RTOL)
    assert not isinstance(got[1], jask.DiskArray)


def test_custom_vjp_cotangents_take_their_inputs_kinds():
    """A custom_vjp rule written for jax.Arrays may give an in-memory cotangent for a
    DiskArray input, or a DiskArray one for an in-memory input (vmap's batched rules do)."""
    rng = np.random.default_rng(32)
    x_np, y_np = rng.normal(size=(2, 40, 3)).astype(np.float32)

    @jax.custom_vjp
    def f(x, y):
        return x * y

    def f_fwd(x, y):
        return f(x, y), (x, y)

    def f_bwd(res, g):
        x, y = res
        # x's cotangent in memory whatever x's kind; y's a DiskArray where x is one
        gy = g * y
        return jask.materialize(gy) if isinstance(gy, jask.DiskArray) else gy, g * x

    f.defvjp(f_fwd, f_bwd)

    def loss(x, y):
        return jnp.sum(f(x, y) ** 2)

    got = jax.grad(loss, argnums=(0, 1))(disk(x_np), jnp.asarray(y_np))
    ref = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(got, ref, RTOL)
    assert isinstance(got[0], jask.DiskArray) and not isinstance(got[1], jask.DiskArray)


def test_diffrax_neural_ode_fit():
    eqx = pytest.importorskip("equinox")
    diffrax = pytest.importorskip("diffrax")
    y0_np = images((8, 2), seed=28)
    ts = jnp.linspace(0.0, 1.0, 5)
    target_np = images((8, 5, 2), seed=29) * 0.1

    class Func(eqx.Module):
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.mlp(y)

    class NeuralODE(eqx.Module):
        func: Func

        def __call__(self, ts, y0):
            solution = diffrax.diffeqsolve(
                diffrax.ODETerm(self.func),
                diffrax.Tsit5(),
                t0=ts[0],
                t1=ts[-1],
                dt0=0.1,
                y0=y0,
                saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=diffrax.ConstantStepSize(),
            )
            return solution.ys

    model = NeuralODE(Func(eqx.nn.MLP(2, 2, 8, 1, activation=jnp.tanh, key=jax.random.key(0))))

    @eqx.filter_jit
    @eqx.filter_value_and_grad
    def grad_loss(model, y0, target):
        ys = jax.vmap(model, in_axes=(None, 0))(ts, y0)
        return jnp.mean((ys - target) ** 2)

    out = grad_loss(model, disk(y0_np), jnp.asarray(target_np))
    ref = grad_loss(model, jnp.asarray(y0_np), jnp.asarray(target_np))
    assert_trees_match(out, ref, RTOL)


@pytest.mark.parametrize("differentiate", ["grad", "jvp"])
def test_stop_gradient_in_a_jitted_function_gives_a_symbolic_zero_tangent(differentiate):
    """lineax's JVP rule asserts that its solver state (a stop_gradient of the operator) has
    JAX's symbolic zero tangent; a Jask op without a derivative, staged in a jitted function
    that runs under differentiation, gives one, as jax.lax.stop_gradient does."""
    seen = []  # the tangents probe's rule was given

    @jax.custom_jvp
    def probe(x):
        return x

    def probe_jvp(primals, tangents):
        seen.append(type(tangents[0]).__name__)
        return primals[0], tangents[0]

    probe.defjvp(probe_jvp, symbolic_zeros=True)
    x_np = np.random.default_rng(33).normal(size=(40, 3)).astype(np.float32)

    @jax.jit
    def stopped(x):
        return lax.stop_gradient(x * 2.0)

    def f(x):
        return jnp.sum(probe(stopped(x)) * x)

    results = []
    for x in (disk(x_np), jnp.asarray(x_np)):
        if differentiate == "grad":
            results.append(jax.grad(f)(x))
        else:
            results.append(jax.jvp(f, (x,), (jnp.ones_like(x_np),)))
    assert_trees_match(results[0], results[1], RTOL)
    assert seen == []  # JAX runs a custom_jvp rule only for a tangent that is not symbolic zero


def test_lineax_linear_solves():
    lx = pytest.importorskip("lineax")
    rng = np.random.default_rng(30)
    M = rng.normal(size=(24, 24)).astype(np.float32)
    A_np = M @ M.T / 24 + np.eye(24, dtype=np.float32)
    b_np = rng.normal(size=24).astype(np.float32)

    @jax.jit
    def solve(A, b):
        lu = lx.linear_solve(lx.MatrixLinearOperator(A), b, solver=lx.LU()).value
        operator = lx.MatrixLinearOperator(A, lx.positive_semidefinite_tag)
        cg = lx.linear_solve(operator, b, solver=lx.CG(rtol=1e-6, atol=1e-6)).value
        return lu, cg

    def objective(A, b):
        return jnp.sum(solve(A, b)[0] ** 2)

    out = (
        solve(disk(A_np), disk(b_np)),
        jax.grad(objective, argnums=(0, 1))(disk(A_np), disk(b_np)),
    )
    ref = (
        solve(A_np, b_np),
        jax.grad(objective, argnums=(0, 1))(jnp.asarray(A_np), jnp.asarray(b_np)),
    )
    assert_trees_match(out, ref, 1e-3)
    assert_on_disk(out[1], "grads")


def test_kmeans_lloyd_python_loop():
    rng = np.random.default_rng(43)
    centers = np.asarray([[0, 0], [6, 6], [-6, 6]], np.float32)
    X_np = (centers[rng.integers(0, 3, 300)] + rng.normal(size=(300, 2))).astype(np.float32)

    def kmeans(X, k=3, iters=4):
        centroids = X[jnp.array([0, 100, 200])]
        for _ in range(iters):
            dists = jnp.linalg.norm(X[:, None, :] - centroids[None, :, :], axis=-1)
            assign = jnp.argmin(dists, axis=1)
            centroids = jnp.stack(
                [jnp.mean(X, axis=0, where=(assign == j)[:, None]) for j in range(k)]
            )
        return centroids, assign, jnp.bincount(assign, length=k)

    out = kmeans(disk(X_np))
    ref = kmeans(jnp.asarray(X_np))
    assert_trees_match(out, ref, RTOL)


def test_logistic_regression_with_optax_lbfgs():
    """optax's L-BFGS (a zoom linesearch in while_loops) on a DiskArray design matrix."""
    rng = np.random.default_rng(44)
    X_np = rng.normal(size=(200, 5)).astype(np.float32)
    y_np = (X_np @ np.asarray([1.0, -2.0, 0.5, 0.0, 1.5]) > 0).astype(np.float32)

    def fit(X, y):
        def loss(w):
            logits = X @ w[:-1] + w[-1]
            return optax.sigmoid_binary_cross_entropy(logits, y).mean() + 1e-2 * jnp.sum(w**2)

        opt = optax.lbfgs()
        value_and_grad = optax.value_and_grad_from_state(loss)

        @jax.jit
        def step(w, state):
            value, grad = value_and_grad(w, state=state)
            updates, state = opt.update(grad, state, w, value=value, grad=grad, value_fn=loss)
            return optax.apply_updates(w, updates), state, value

        w = jnp.zeros(6)
        state = opt.init(w)
        values = []
        for _ in range(3):
            w, state, value = step(w, state)
            values.append(value)
        return w, values

    assert_trees_match(fit(disk(X_np), disk(y_np)), fit(jnp.asarray(X_np), jnp.asarray(y_np)), 1e-3)
