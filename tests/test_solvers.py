"""lineax, optimistix and diffrax on DiskArrays: each program against the same program on
jax.Arrays (values, dtypes, and gradients with respect to the DiskArrays)."""

import diffrax
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
import pytest

import jask

from conftest import assert_close

N = 7


def _values(x):
    return np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)


def _check(out, ref, rtol=1e-4):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out, ref)
    assert_close(_values(out), ref, rtol=rtol)


@pytest.fixture
def system(rng):
    a = (rng.standard_normal((N, N)) + 4 * np.eye(N)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    return a, b


def test_eval_shape_of_a_diskarray_is_a_shape_dtype_struct(system):
    a, _ = system
    struct = jax.eval_shape(lambda x: x * 2, jask.DiskArray.from_numpy(a))
    assert isinstance(struct, jax.ShapeDtypeStruct)
    assert struct == jax.ShapeDtypeStruct((N, N), jnp.float32)
    assert jax.ShapeDtypeStruct.like(jask.DiskArray.from_numpy(a)) == struct
    # tracing on the struct traces on a DiskArray
    assert "disk:float32[7,7]" in str(jax.make_jaxpr(lambda x: x + 1)(struct))


def solve(a, b):
    return lx.linear_solve(lx.MatrixLinearOperator(a), b).value


def test_lineax_linear_solve_of_a_diskarray_matrix(system):
    a, b = system
    _check(solve(jask.DiskArray.from_numpy(a), jnp.asarray(b)), solve(jnp.asarray(a), b))


def test_lineax_gradients_with_respect_to_matrix_and_vector(system):
    a, b = system
    loss = lambda a, b: jnp.sum(solve(a, b) ** 2)
    ga, gb = jax.grad(loss, (0, 1))(jask.DiskArray.from_numpy(a), jnp.asarray(b))
    ra, rb = jax.grad(loss, (0, 1))(jnp.asarray(a), jnp.asarray(b))
    assert isinstance(ga, jask.DiskArray)
    _check(ga, ra)
    _check(gb, rb)


def test_lineax_solve_of_a_diskarray_vector(system):
    a, b = system
    _check(solve(jnp.asarray(a), jask.DiskArray.from_numpy(b)), solve(jnp.asarray(a), b))


# optimistix's Newton step calls lineax's linear_solve primitive with an operator whose
# function (a jaxpr among the primitive's params) was traced on the DiskArray argument; staged
# as it is, JAX's lowering could not take it ('DiskArray' object has no attribute 'val'): the
# lowering pass inline_library_primitives replaces it by its implementation's equations.
@pytest.mark.parametrize("budget", ["64MB", "4KB"])
def test_optimistix_root_find_with_diskarray_parameters(system, budget, small_budget):
    small_budget(budget)
    a, b = system

    def root(a):
        fn = lambda y, a: a @ y + 0.1 * jnp.tanh(y) - jnp.asarray(b)
        return optx.root_find(fn, optx.Newton(1e-6, 1e-6), jnp.zeros(N), args=a).value

    disk = jask.DiskArray.from_numpy(a)
    _check(root(disk), root(jnp.asarray(a)))
    _check(jax.jit(root)(disk), root(jnp.asarray(a)))
    # the root's derivative with respect to the matrix: the implicit function theorem's solve
    loss = lambda a: jnp.sum(root(a) ** 2)
    grad = jax.grad(loss)(disk)
    assert isinstance(grad, jask.DiskArray)
    _check(grad, jax.grad(loss)(jnp.asarray(a)))


def test_lineax_function_operator_closing_over_a_diskarray(system, small_budget):
    """An operator whose function closes over a DiskArray (lineax refused its type in the
    solve's abstract evaluation), eagerly, jitted and differentiated, at a budget of blocks."""
    small_budget("4KB")
    a, b = system

    def solve_by_function(a):
        op = lx.FunctionLinearOperator(lambda v: a @ v, jax.ShapeDtypeStruct((N,), jnp.float32))
        return lx.linear_solve(op, jnp.asarray(b), lx.GMRES(1e-6, 1e-6)).value

    disk, ref = jask.DiskArray.from_numpy(a), solve_by_function(jnp.asarray(a))
    _check(solve_by_function(disk), ref)
    _check(jax.jit(solve_by_function)(disk), ref)
    loss = lambda a: jnp.sum(solve_by_function(a) ** 2)
    _check(jax.grad(loss)(disk), jax.grad(loss)(jnp.asarray(a)), rtol=1e-3)


def test_optimistix_least_squares_with_diskarray_data(rng):
    x = rng.standard_normal((40, 3)).astype(np.float32)
    t = (np.tanh(x @ np.array([0.5, -1.0, 2.0])) + 0.01 * rng.standard_normal(40)).astype(
        np.float32
    )

    def fit(x):
        fn = lambda w, x: jnp.tanh(x @ w) - jnp.asarray(t)
        solver = optx.LevenbergMarquardt(1e-6, 1e-6)
        return optx.least_squares(fn, solver, jnp.zeros(3), args=x).value

    _check(fit(jask.DiskArray.from_numpy(x)), fit(jnp.asarray(x)), rtol=1e-3)


def neural_ode(weights, y0):
    w1, w2 = weights

    def field(t, y, args):
        w1, w2 = args
        return jnp.tanh(y @ w1) @ w2

    term = diffrax.ODETerm(field)
    sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, args=(w1, w2))
    return sol.ys[-1]


def test_diffrax_neural_ode_and_its_gradient_with_diskarray_weights(rng):
    w = [(0.5 * rng.standard_normal(s)).astype(np.float32) for s in ((4, 9), (9, 4))]
    y0 = jnp.asarray(rng.standard_normal(4).astype(np.float32))
    disk = [jask.DiskArray.from_numpy(v) for v in w]
    memory = [jnp.asarray(v) for v in w]
    _check(neural_ode(disk, y0), neural_ode(memory, y0))
    loss = lambda weights: jnp.sum(neural_ode(weights, y0) ** 2)
    grads, refs = jax.grad(loss)(disk), jax.grad(loss)(memory)
    for g, r in zip(grads, refs):
        assert isinstance(g, jask.DiskArray)
        _check(g, r)
