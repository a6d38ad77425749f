"""Complex sums, cumulative sums and products of matrices larger than XLA's in-memory route
(jask/_api/complex_parts.py: real and imaginary parts through the engine's real routes), and
the block route's cumulative sums (independent along axis 0 only when they sum along another).

Against jnp on jax.Arrays: values and dtypes, eagerly, under jit, and gradients. The budget
(64KB) holds none of the operands: every case streams.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

BUDGET = "64KB"


@pytest.fixture(autouse=True)
def tiny(small_budget):
    small_budget(BUDGET)


def complex_values(rng, shape, dtype=np.complex64):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)


def disk(a):
    return jask.DiskArray.from_numpy(a)


def check(got, want, what):
    want = np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    tol = 1e-5 if want.dtype in (np.complex64, np.float32) else 1e-12
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol * scale, err_msg=what)


B = complex_values(np.random.default_rng(1), (40, 30))

CASES = {
    "sum": jnp.sum,
    "sum_axis0": lambda x: jnp.sum(x, axis=0),
    "sum_axis1": lambda x: jnp.sum(x, axis=1),
    "mean": jnp.mean,
    "cumsum_axis0": lambda x: jnp.cumsum(x, axis=0),
    "cumsum_axis1_reverse": lambda x: jax.lax.cumsum(x, axis=1, reverse=True),
    "matmul_by_memory": lambda x: x @ B,
    "gram": lambda x: x.T @ x,
    "conj_gram": lambda x: jnp.conj(x).T @ x,
    "vdot": lambda x: jnp.vdot(x, x),
    "einsum": lambda x: jnp.einsum("ij,jk->ik", x, B),
    "real_weights": lambda x: x @ np.ones((40, 3), np.float32),
    "scatter_one": lambda x: x.at[3, 4].set(2 + 1j),
    "scatter_rows": lambda x: x.at[jnp.array([1, 7, 250])].set(B.T[:3]),
    "scatter_add_rows": lambda x: x.at[jnp.array([1, 7, 1])].add(B.T[:3]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_linear_ops_stream_as_jnp(name, rng):
    a = complex_values(rng, (301, 40))  # 94 KiB: more than the budget, not a block multiple
    f = CASES[name]
    want = f(jnp.asarray(a))
    check(f(disk(a)), want, name)
    check(jax.jit(f)(disk(a)), want, (name, "jit"))


def test_complex128_under_x64(rng, x64):
    a = complex_values(rng, (301, 40), np.complex128)
    for name in ("sum_axis0", "cumsum_axis0", "gram"):
        f = CASES[name]
        check(jax.jit(f)(disk(a)), f(jnp.asarray(a)), (name, "complex128"))


def test_gradients_of_a_real_loss_of_complex_ops(rng):
    a = complex_values(rng, (301, 40))

    def loss(x):
        y = x @ B
        return jnp.sum(jnp.abs(y) ** 2) + jnp.real(jnp.sum(jnp.cumsum(x, axis=0) * 1j))

    want = jax.grad(loss)(jnp.asarray(a))
    got = jax.grad(loss)(disk(a))
    assert isinstance(got, jask.DiskArray)
    check(got, want, "grad")
    check(jax.jit(jax.grad(loss))(disk(a)), want, "jit(grad)")


def test_a_cumulative_sum_along_axis_0_is_never_cut_into_blocks_of_that_axis(rng):
    # int8 rows of 12,000: the engine's running sums (8 bytes a column) exceed 64KB, while a
    # block of rows fits the XLA route's half: the block route once summed each block alone
    a = rng.integers(-3, 3, size=(50, 12000)).astype(np.int8)
    want = jax.lax.cumsum(jnp.asarray(a), axis=0)
    try:
        got = jax.lax.cumsum(disk(a), axis=0)
    except NotImplementedError as error:
        assert "axis 0" in str(error) and "int8[50,12000]" in str(error)
    else:
        check(got, want, "int8 cumsum")
    # along the other axis the block route applies and is exact
    check(jax.lax.cumsum(disk(a), axis=1), jax.lax.cumsum(jnp.asarray(a), axis=1), "axis 1")


@pytest.mark.parametrize("on_disk", ["a", "b", "both"])
def test_complex_solve_and_its_gradients_in_memory_route(on_disk, small_budget, rng):
    # small enough for XLA's in-memory route. custom_linear_solve's jaxprs are typed on the
    # DiskArray operands: the whole primitive once went to XLA with them read into memory
    # (a kernel error at run time), and a complex matvec gave an in-memory vector for a
    # DiskArray one (linear_transpose's cotangent type error)
    small_budget("64MB")
    a = complex_values(rng, (3, 3)) + 3 * np.eye(3, dtype=np.complex64)
    b = complex_values(rng, (3,))
    args = [disk(a) if on_disk in ("a", "both") else a, disk(b) if on_disk in ("b", "both") else b]
    ct = np.ones(3, np.complex64)

    def pullback(a, b):
        return jax.vjp(jnp.linalg.solve, a, b)[1](ct)

    want_x = jnp.linalg.solve(a, b)
    want = pullback(jnp.asarray(a), jnp.asarray(b))
    check(jnp.linalg.solve(*args), want_x, "solve")
    for got in (pullback(*args), jax.jit(pullback)(*args)):
        for g, w, name in zip(got, want, "ab"):
            check(g, w, ("cotangent", name))


@pytest.mark.parametrize("shapes", [((2, 1, 3, 3), (1, 4, 3, 4)), ((2, 3, 3), (2, 3, 4))])
def test_batched_complex_solve(shapes, small_budget, rng):
    # vmap's per-element loop made a complex zero DiskArray with the engine's double fill
    # value ("unsupported scalar operand dtype": linalg_test testSolve0)
    small_budget("64MB")
    a = complex_values(rng, shapes[0]) + 3 * np.eye(3, dtype=np.complex64)
    b = complex_values(rng, shapes[1])
    want = jnp.linalg.solve(a, b)
    check(jnp.linalg.solve(disk(a), disk(b)), want, "eager")
    check(jax.jit(jnp.linalg.solve)(disk(a), disk(b)), want, "jit")


def test_gradients_of_complex_dynamic_slices(rng):
    a = complex_values(rng, (300, 40))
    u = jnp.asarray(complex_values(rng, (4, 40)))

    def sliced(x, i):
        return jnp.sum(jnp.abs(jax.lax.dynamic_slice(x, (i, 0), (5, 40))) ** 2)

    def updated(x, i):
        return jnp.sum(jnp.abs(jax.lax.dynamic_update_slice(x, u, (i, 0))) ** 2)

    for f in (sliced, updated):
        want = jax.grad(f)(jnp.asarray(a), 3)
        check(jax.grad(f)(disk(a), 3), want, (f.__name__, "grad"))
        check(jax.jit(jax.grad(f))(disk(a), 3), want, (f.__name__, "jit(grad)"))
