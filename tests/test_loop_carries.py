"""The carry rule (jask/_api/loops.py): a loop body or cond branch that turns an in-memory
value into a DiskArray of the same shape and dtype, or back, gives the carry one kind (in
memory when it fits, a DiskArray otherwise), with the values and dtypes of the same program
on jax.Arrays; k-means, GMM EM and power iteration over a DiskArray as users write them."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask._api import operands

from conftest import assert_close

N, K = 37, 5  # not block multiples


@pytest.fixture
def small_limit(monkeypatch):
    """Results of more than 16 elements stay on disk."""
    monkeypatch.setattr(operands, "IN_MEMORY_LIMIT", 16)


def _values(x):
    return np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)


def _check(out, ref, kind):
    assert isinstance(out, jask.DiskArray) == (kind == "disk"), type(out)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert_close(_values(out), ref)


def _data(rng, shape=(N, K)):
    x = rng.standard_normal(shape).astype(np.float32)
    return x, jask.DiskArray.from_numpy(x)


def _grow(d):
    """A body that makes a DiskArray from an in-memory carry (and keeps a DiskArray one)."""
    return lambda i, c: jnp.zeros_like(d) + c * 0.5 + d * i


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_fori_loop_in_memory_carry_stays_in_memory_when_it_fits(rng, jit, budget):
    x, d = _data(rng)
    run = lambda d, c: jax.lax.fori_loop(0, 4, _grow(d), c)
    run = jax.jit(run) if jit else run
    c0 = jnp.ones((N, K), jnp.float32)
    _check(run(d, c0), run(jnp.asarray(x), c0), "memory")


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_fori_loop_carry_becomes_a_diskarray_when_it_does_not_fit(rng, jit, small_limit):
    x, d = _data(rng)
    run = lambda d, c: jax.lax.fori_loop(0, 4, _grow(d), c)
    run = jax.jit(run) if jit else run
    c0 = jnp.ones((N, K), jnp.float32)
    _check(run(d, c0), run(jnp.asarray(x), c0), "disk")


def test_matmul_carry(rng):
    """x.T @ x is a DiskArray or an in-memory array by its size; either way the carry is
    an in-memory float32[K, K] and the iteration matches jnp's."""
    x, d = _data(rng)

    def run(x):
        body = lambda i, c: c + (x.T @ x) @ c * 1e-3
        return jax.lax.fori_loop(0, 3, body, jnp.eye(K, dtype=jnp.float32))

    _check(run(d), run(jnp.asarray(x)), "memory")


def test_diskarray_carry_that_the_body_brings_into_memory(rng):
    """A DiskArray initial carry whose body gives an in-memory array: the carry is in memory
    (it fits), the initial one read into memory."""
    x, d = _data(rng)
    w = jnp.asarray(rng.standard_normal((K,)).astype(np.float32))

    def run(init):
        body = lambda c: (c[0] + 1, jnp.tanh(jnp.ones((N, K), jnp.float32) * w + jnp.mean(c[1])))
        return jax.lax.while_loop(lambda c: c[0] < 3, body, (0, init))

    out, ref = run(d)[1], run(jnp.asarray(x))[1]
    _check(out, ref, "memory")


def test_diskarray_carry_stays_on_disk_when_the_body_gives_memory_and_it_does_not_fit(
    rng, small_limit
):
    x, d = _data(rng)
    y = rng.standard_normal((N, K)).astype(np.float32)

    def run(init):
        return jax.lax.fori_loop(0, 3, lambda i, c: jnp.asarray(y) * i, init)

    _check(run(d), run(jnp.asarray(x)), "disk")


def test_scan_with_ys_and_a_weakly_typed_carry(rng):
    x, d = _data(rng, (N,))

    def run(x):
        def body(c, xi):
            new = jnp.zeros_like(x) + c + xi
            return new, jnp.sum(new)

        return jax.lax.scan(body, jnp.zeros((N,)), jnp.arange(4.0))

    (c, ys), (c_ref, ys_ref) = run(d), run(jnp.asarray(x))
    _check(c, c_ref, "memory")
    _check(ys, ys_ref, "memory")


@jax.tree_util.register_pytree_node_class
class _Stack:
    """A mutable pytree container, as flax's nnx.scan carries its graph state in a deque."""

    def __init__(self, items):
        self.items = list(items)

    def tree_flatten(self):
        return self.items, None

    @classmethod
    def tree_unflatten(cls, _, items):
        return cls(items)


@pytest.mark.parametrize("loop", ["scan", "while_loop"])
def test_a_body_that_empties_a_mutable_carry(rng, loop):
    """The body pops its carry out of a container it was given (leaving it empty) and
    returns a DiskArray in a new one: the carry it took is read before the body runs."""
    x, d = _data(rng)

    def run(x):
        def body(stack):
            c = stack.items.pop()
            return _Stack([jnp.zeros_like(x) + c * 0.5 + x])

        c0 = _Stack([jnp.ones((N, K), jnp.float32)])
        if loop == "scan":
            return jax.lax.scan(lambda s, _: (body(s), None), c0, length=3)[0].items[0]
        return jax.lax.fori_loop(0, 3, lambda i, s: body(s), c0).items[0]

    _check(run(d), run(jnp.asarray(x)), "memory")


def test_while_loop_disk_carry_under_jit(rng, small_limit):
    x, d = _data(rng)

    def run(x):
        body = lambda c: (c[0] + 1, jnp.zeros_like(x) + c[1] * 0.5)
        return jax.lax.while_loop(lambda c: c[0] < 5, body, (0, jnp.ones((N, K))))

    out, ref = jax.jit(run)(d), run(jnp.asarray(x))
    assert int(out[0]) == int(ref[0]) == 5
    _check(out[1], ref[1], "disk")


@pytest.mark.parametrize("limit", [None, 16], ids=["fits", "disk"])
def test_cond_and_switch_branches_of_both_kinds(rng, monkeypatch, limit):
    if limit:
        monkeypatch.setattr(operands, "IN_MEMORY_LIMIT", limit)
    x, d = _data(rng)
    kind = "disk" if limit else "memory"
    ones = jnp.ones((N, K), jnp.float32)

    def run(x, p):
        return jax.lax.cond(p, lambda: x * 2.0, lambda: ones)

    def run_switch(x, i):
        return jax.lax.switch(i, [lambda: ones, lambda: x + 1.0, lambda: -ones])

    for p in (True, False):
        _check(jax.jit(run)(d, p), run(jnp.asarray(x), p), kind)
    for i in range(3):
        _check(run_switch(d, i), run_switch(jnp.asarray(x), i), kind)


def test_types_that_differ_in_more_than_where_they_live_raise_jaxs_error(rng):
    _, d = _data(rng)
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        jax.lax.fori_loop(0, 2, lambda i, c: (jnp.zeros_like(d) + c)[:3], jnp.ones((N, K)))
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        jax.lax.fori_loop(0, 2, lambda i, c: c.astype(jnp.int32), jnp.ones(3))


def test_gradient_through_a_loop_whose_carry_changes_kind(rng):
    x, d = _data(rng)

    def loss(x):
        body = lambda c, _: (jnp.zeros_like(x) + 2.0 * c, None)
        carry, _ = jax.lax.scan(body, jnp.ones((N, K), jnp.float32), None, length=3)
        return jnp.sum(carry * x)

    g, ref = jax.grad(loss)(d), jax.grad(loss)(jnp.asarray(x))
    assert isinstance(g, jask.DiskArray) and g.dtype == ref.dtype
    assert_close(_values(g), ref)


def test_gradient_through_fori_loop_over_small_slices(rng):
    x, d = _data(rng)

    def loss(x):
        body = lambda i, c: jnp.tanh(x[:K] @ c)
        return jnp.sum(jax.lax.fori_loop(0, 3, body, jnp.eye(K, dtype=jnp.float32)) ** 2)

    g, ref = jax.grad(loss)(d), jax.grad(loss)(jnp.asarray(x))
    assert g.shape == ref.shape and g.dtype == ref.dtype
    assert_close(_values(g), ref)


def _sin_loop(c0, x):
    """A body that computes on the DiskArray x and the carry (its intermediates are
    DiskArrays; the carry is brought back into memory)."""
    return jnp.sum(jax.lax.fori_loop(0, 3, lambda i, c: jnp.sin(x * 0.5 + c), c0) ** 2)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_gradient_through_a_loop_whose_body_computes_on_a_diskarray(rng, jit):
    x, d = _data(rng)
    c0 = jnp.asarray(rng.standard_normal((N, K)).astype(np.float32))
    grad = jax.grad(_sin_loop, (0, 1))
    grad = jax.jit(grad) if jit else grad
    (gc, gx), (rc, rx) = grad(c0, d), grad(c0, jnp.asarray(x))
    assert not isinstance(gc, jask.DiskArray) and isinstance(gx, jask.DiskArray)
    _check(gc, rc, "memory")
    _check(gx, rx, "disk")


def test_jvp_and_linearize_through_a_loop_over_a_diskarray(rng):
    x, d = _data(rng)
    c0 = jnp.ones((N, K), jnp.float32)
    t = rng.standard_normal((N, K)).astype(np.float32)
    f = lambda x: _sin_loop(c0, x)
    ref = jax.jvp(f, (jnp.asarray(x),), (jnp.asarray(t),))[1]
    out = jax.jvp(f, (d,), (jask.DiskArray.from_numpy(t),))[1]
    assert_close(out, ref)
    assert_close(jax.linearize(f, d)[1](jask.DiskArray.from_numpy(t)), ref)


def test_gradient_through_a_scan_with_a_diskarray_carry(rng, small_limit):
    x, d = _data(rng)

    def loss(x):
        body = lambda c, xi: (jnp.tanh(x * xi + c), jnp.sum(c))
        carry, ys = jax.lax.scan(body, jnp.ones((N, K)), jnp.arange(1.0, 4.0))
        return jnp.sum(carry**2) + jnp.sum(ys)

    g, ref = jax.grad(loss)(d), jax.grad(loss)(jnp.asarray(x))
    _check(g, ref, "disk")


# -- the algorithms of issue 33 -------------------------------------------------------------


def _clusters(rng, n=301):
    centers = np.array([[0, 0, 0], [6, 6, 0], [0, 6, 6], [6, 0, 6]], np.float32)
    x = centers[rng.integers(0, 4, n)] + rng.standard_normal((n, 3))
    return x.astype(np.float32)


def kmeans(x, c0, iters=5):
    def body(i, c):
        d2 = jnp.sum((x[:, None, :] - c[None, :, :]) ** 2, axis=-1)
        onehot = jax.nn.one_hot(jnp.argmin(d2, axis=1), c.shape[0], dtype=x.dtype)
        counts = jnp.sum(onehot, axis=0)
        return (onehot.T @ x) / jnp.maximum(counts, 1.0)[:, None]

    return jax.lax.fori_loop(0, iters, body, c0)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_kmeans_lloyd(rng, jit, small_budget):
    small_budget("16KB")
    x = _clusters(rng)
    c0 = jnp.asarray(x[:4])
    run = jax.jit(kmeans) if jit else kmeans
    out, ref = run(jask.DiskArray.from_numpy(x), c0), kmeans(jnp.asarray(x), c0)
    _check(out, ref, "memory")


def gmm_em(x, means, log_vars, log_weights, iters=3):
    """EM for a mixture of diagonal Gaussians."""

    def body(i, params):
        means, log_vars, log_weights = params
        var = jnp.exp(log_vars)
        diff = x[:, None, :] - means[None, :, :]
        log_p = -0.5 * jnp.sum(diff**2 / var + log_vars + jnp.log(2 * jnp.pi), axis=-1)
        log_r = log_p + log_weights
        resp = jnp.exp(log_r - jax.nn.logsumexp(log_r, axis=1, keepdims=True))
        nk = jnp.sum(resp, axis=0)
        means = (resp.T @ x) / nk[:, None]
        second = (resp.T @ (x * x)) / nk[:, None]
        var = jnp.maximum(second - means**2, 1e-3)
        return means, jnp.log(var), jnp.log(nk / x.shape[0])

    return jax.lax.fori_loop(0, iters, body, (means, log_vars, log_weights))


def test_gmm_em(rng, small_budget):
    small_budget("16KB")
    x = _clusters(rng, 203)
    init = (jnp.asarray(x[:4]), jnp.zeros((4, 3)), jnp.full((4,), -np.log(4.0), jnp.float32))
    out = gmm_em(jask.DiskArray.from_numpy(x), *init)
    ref = gmm_em(jnp.asarray(x), *init)
    for o, r in zip(out, ref):
        assert not isinstance(o, jask.DiskArray) and o.dtype == r.dtype
        assert_close(o, r, rtol=1e-4)


def power_iteration(a, v0, tol=1e-5, max_iters=200):
    def cond(state):
        i, _, delta = state
        return (i < max_iters) & (delta > tol)

    def body(state):
        i, v, _ = state
        w = a @ v
        w = w / jnp.linalg.norm(w)
        return i + 1, w, jnp.linalg.norm(w - v)

    i, v, _ = jax.lax.while_loop(cond, body, (0, v0, jnp.float32(np.inf)))
    return i, v, v @ (a @ v)


@pytest.mark.parametrize("limit", [None, 16], ids=["fits", "disk"])
def test_power_iteration(rng, small_budget, monkeypatch, limit):
    if limit:
        monkeypatch.setattr(operands, "IN_MEMORY_LIMIT", limit)
    small_budget("16KB")
    n = 67
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    a = (q * np.append(np.linspace(1.0, 2.0, n - 1), 4.0)) @ q.T  # symmetric, top eigenvalue 4
    a = a.astype(np.float32)
    v0 = np.full((n,), 1 / np.sqrt(n), np.float32)
    # a DiskArray start: the carry stays on disk when it does not fit, whichever kind a @ v has
    init = jask.DiskArray.from_numpy(v0) if limit else jnp.asarray(v0)
    i, v, lam = power_iteration(jask.DiskArray.from_numpy(a), init)
    i_ref, v_ref, lam_ref = power_iteration(jnp.asarray(a), v0)
    assert 1 < int(i) < 200 and abs(int(i) - int(i_ref)) <= 1
    assert isinstance(v, jask.DiskArray) == bool(limit)
    assert v.dtype == v_ref.dtype and lam.dtype == lam_ref.dtype
    assert_close(_values(v), v_ref, rtol=1e-4)
    assert_close(lam, lam_ref, rtol=1e-5)
    np.testing.assert_allclose(float(lam), 4.0, rtol=1e-4)


# -- plain JAX is unchanged -----------------------------------------------------------------

PLAIN = textwrap.dedent(
    """
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    from jax import lax
    if sys.argv[1] == "jask":
        import jask
    cases = {
        "fori": lambda: lax.fori_loop(0, 3, lambda i, c: c * 2 + i, jnp.ones(2)),
        "fori_weak": lambda: lax.fori_loop(0, 3, lambda i, c: c + jnp.float32(1), 0.0),
        "fori_bad": lambda: lax.fori_loop(0, 3, lambda i, c: c.astype("int32"), jnp.ones(2)),
        "while": lambda: lax.while_loop(lambda c: c < 5, lambda c: c + 1, 0),
        "while_bad": lambda: lax.while_loop(lambda c: c < 5, lambda c: (c, c), 0),
        "scan_bad": lambda: lax.scan(lambda c, x: (c[:1], x), jnp.ones(2), jnp.ones(3)),
        "map": lambda: lax.map(lambda x: x * 2, jnp.arange(3.0)),
        "cond": lambda: lax.cond(True, lambda x: x + 1, lambda x: x - 1, 1.0),
        "cond_bad": lambda: lax.cond(True, lambda: jnp.ones(2), lambda: jnp.ones(3)),
        "switch": lambda: lax.switch(1, [lambda: 1.0, lambda: 2.0]),
        "switch_bad": lambda: lax.switch(1, [lambda: 1.0, lambda: jnp.int32(2)]),
        "grad_scan": lambda: jax.grad(
            lambda x: lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=3)[0])(1.0),
        "eval_shape": lambda: jax.eval_shape(lambda x: (x, x.sum()), jnp.ones((2, 3))),
        "like": lambda: jax.ShapeDtypeStruct.like(jnp.ones(2)),
    }
    out = {}
    for name, f in cases.items():
        try:
            out[name] = repr(jax.tree.leaves(f()))
        except Exception as e:
            out[name] = ["error", type(e).__name__, str(e)]
    print(json.dumps(out))
    """
)


def test_importing_jask_leaves_plain_loops_conds_and_eval_shape_as_they_are():
    def run(mode):
        done = subprocess.run(
            [sys.executable, "-c", PLAIN, mode],
            capture_output=True,
            text=True,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            timeout=600,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    plain, with_jask = run("plain"), run("jask")
    assert plain == with_jask
    assert plain["fori_bad"][0] == plain["cond_bad"][0] == "error"


@pytest.mark.parametrize("vmap", [False, True], ids=["plain", "vmap"])
def test_a_body_traced_once_for_a_diskarray_runs_on_an_in_memory_carry(rng, vmap):
    """A library may trace a loop body once (equinox's while loops) and run its jaxpr again
    after the carry rule moved the carry to memory: its Jask ops, built for a DiskArray,
    then meet in-memory values and move them to the kind they were built for."""
    from jax.extend.core import jaxpr_as_fun

    x, d = _data(rng)
    body = lambda c: jnp.sin(c) * 0.5 + c
    traced = jaxpr_as_fun(jax.make_jaxpr(body)(d))

    def run(c):
        return jax.lax.fori_loop(0, 3, lambda i, c: traced(c)[0], c)

    def ref(c):
        return jax.lax.fori_loop(0, 3, lambda i, c: body(c), c)

    if vmap:
        run, ref = jax.vmap(run), jax.vmap(ref)
        x, d = x[None].repeat(2, axis=0), None
    _check(run(jnp.asarray(x)), ref(jnp.asarray(x)), "memory")
