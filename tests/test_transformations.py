"""Every op and composition, under eager, jit, grad, value_and_grad, jit(grad) and grad(jit),
against jax.numpy on in-memory copies, under three memory budgets."""

import hashlib

import cases_elementwise
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _engine

import cases_batched
import cases_gather
import cases_scan_sort
import cases_shapes
from case import BIAS, Case, K, M, N
from conftest import SMALLEST_GRADIENT_BUDGET, assert_close

CASES = [
    Case("add", jask.add, jnp.add, ((M, K), (M, K))),
    Case("sub", jask.sub, jnp.subtract, ((M, K), (M, K))),
    Case("mul", jask.mul, jnp.multiply, ((M, K), (M, K))),
    Case(
        "operators", lambda x, y: -(x + y) * y - x, lambda x, y: -(x + y) * y - x, ((M, K), (M, K))
    ),
    Case("scale_right", lambda x: x * 2.5, lambda x: x * 2.5, ((M, K),)),
    Case(
        "scale_left_numpy", lambda x: np.float32(3.0) * x, lambda x: np.float32(3.0) * x, ((M, K),)
    ),
    Case("scale_left_jax", lambda x: jnp.array(0.1) * x, lambda x: jnp.array(0.1) * x, ((M, K),)),
    Case("divide", lambda x: x / 4, lambda x: x / 4, ((M, K),)),
    Case("add_scalar", lambda x: 1.5 + x + 2.0, lambda x: 1.5 + x + 2.0, ((M, K),)),
    Case("sub_scalar", lambda x: 3.0 - (x - 2.0), lambda x: 3.0 - (x - 2.0), ((M, K),)),
    Case("negative", jask.negative, jnp.negative, ((M, K),)),
    Case("square", jask.square, jnp.square, ((M, K),)),
    Case("same_input_twice", lambda x: jask.mul(x, x) + x, lambda x: x * x + x, ((M, K),)),
    Case("sum", jask.sum, jnp.sum, ((M, K),), scalar_out=True),
    Case("vdot", jask.vdot, jnp.vdot, ((M, K), (M, K)), scalar_out=True),
    Case("dot_2d_2d", jask.dot, jnp.dot, ((M, K), (K, N))),
    Case("dot_2d_1d", jask.dot, jnp.dot, ((M, K), (K,))),
    Case("dot_1d_2d", jask.dot, jnp.dot, ((K,), (K, N))),
    Case("dot_1d_1d", jask.dot, jnp.dot, ((K,), (K,)), scalar_out=True),
    Case("matmul_operator", lambda a, b: a @ b, lambda a, b: a @ b, ((M, K), (K, N))),
    Case(
        "dot_of_transposes",
        lambda a, b: jask.dot(a.T, b.T),
        lambda a, b: a.T @ b.T,
        ((K, M), (N, K)),
    ),
    Case("transpose_2d", lambda x: x.T, lambda x: x.T, ((M, K),)),
    Case(
        "transpose_3d",
        lambda x: jask.transpose(x, (2, 0, 1)),
        lambda x: jnp.transpose(x, (2, 0, 1)),
        ((13, 17, 11),),
    ),
    Case("reshape", lambda x: jask.reshape(x, (K, M)), lambda x: jnp.reshape(x, (K, M)), ((M, K),)),
    Case(
        "materialize",
        lambda x: jnp.sum(jnp.sin(jask.materialize(x))),
        lambda x: jnp.sum(jnp.sin(x)),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "full",
        lambda x: jask.vdot(x, jask.full(x.shape, 2.0)),
        lambda x: jnp.vdot(x, jnp.full(x.shape, 2.0)),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "exp_log_sqrt",
        lambda x: jnp.log(jnp.sqrt(jnp.abs(x) + 0.5)) + jnp.exp(x) * jax.lax.rsqrt(x * x + 1.0),
        lambda x: jnp.log(jnp.sqrt(jnp.abs(x) + 0.5)) + jnp.exp(x) * jax.lax.rsqrt(x * x + 1.0),
        ((M, K),),
    ),
    Case(
        "activations",
        lambda x: jax.nn.relu(x) + jax.nn.sigmoid(x) * jax.nn.gelu(x) - jax.nn.softplus(x),
        lambda x: jax.nn.relu(x) + jax.nn.sigmoid(x) * jax.nn.gelu(x) - jax.nn.softplus(x),
        ((M, K),),
    ),
    Case("sin", jask.sin, jnp.sin, ((M, K),)),
    Case("cos", jask.cos, jnp.cos, ((M, K),)),
    # Factors near 1 keep the products well inside float32.
    Case(
        "prod",
        lambda x: jask.prod(x * 0.05 + 1.0),
        lambda x: jnp.prod(x * 0.05 + 1.0),
        ((37, 41),),
        scalar_out=True,
    ),
    Case(
        "prod_axes",
        lambda x: (
            jnp.sum(jnp.prod(x * 0.1 + 1.0, axis=0) ** 2)
            + jnp.sum(jnp.prod(x * 0.5 + 1.0, axis=1, keepdims=True) * 2.0)
        ),
        lambda x: (
            jnp.sum(jnp.prod(x * 0.1 + 1.0, axis=0) ** 2)
            + jnp.sum(jnp.prod(x * 0.5 + 1.0, axis=1, keepdims=True) * 2.0)
        ),
        ((M, 13),),
        scalar_out=True,
    ),
    Case(
        "log1p_expm1_tanh",
        lambda x: jnp.log1p(jnp.abs(x)) * jnp.tanh(x) + jnp.expm1(x),
        lambda x: jnp.log1p(jnp.abs(x)) * jnp.tanh(x) + jnp.expm1(x),
        ((M, K),),
    ),
    Case(
        "divide_arrays",
        lambda x, y: x / (y * y + 1.0),
        lambda x, y: x / (y * y + 1.0),
        ((M, K), (M, K)),
    ),
    Case(
        "power",
        lambda x: (jnp.abs(x) + 0.5) ** 1.5 + x**2,
        lambda x: (jnp.abs(x) + 0.5) ** 1.5 + x**2,
        ((M, K),),
    ),
    Case(
        "maximum_minimum_clip",
        lambda x, y: jnp.maximum(x, y) - jnp.minimum(x, 0.2) + jnp.clip(y, -0.5, 0.5),
        lambda x, y: jnp.maximum(x, y) - jnp.minimum(x, 0.2) + jnp.clip(y, -0.5, 0.5),
        ((M, K), (M, K)),
    ),
    Case(
        "where_compare",
        lambda x, y: jnp.where(x > y, x * y, jnp.where(x <= 0.1, -x, y)),
        lambda x, y: jnp.where(x > y, x * y, jnp.where(x <= 0.1, -x, y)),
        ((M, K), (M, K)),
    ),
    Case(
        "other_comparisons",
        lambda x, y: jnp.where(x >= y, x, 0.5) + jnp.where(x != y, y, 0.0) * (x < 0.3),
        lambda x, y: jnp.where(x >= y, x, 0.5) + jnp.where(x != y, y, 0.0) * (x < 0.3),
        ((M, K), (M, K)),
    ),
    Case(
        "sign_abs",
        lambda x: jnp.sign(x) * jnp.abs(x) * 3.0,
        lambda x: jnp.sign(x) * jnp.abs(x) * 3.0,
        ((M, K),),
    ),
    Case(
        "astype_roundtrip",
        lambda x: (x * 2.0).astype(jnp.float32),
        lambda x: (x * 2.0).astype(jnp.float32),
        ((M, K),),
    ),
    Case("broadcast_in_memory_bias", lambda x: x * BIAS + 1.0, lambda x: x * BIAS + 1.0, ((M, K),)),
    Case(
        "broadcast_disk_column_and_row",
        lambda x, c, r: x * c + r,
        lambda x, c, r: x * c + r,
        ((M, K), (M, 1), (K,)),
    ),
    Case(
        "broadcast_to",
        lambda r: jask.broadcast_to(r, (M, K)) * 2.0,
        lambda r: jnp.broadcast_to(r, (M, K)) * 2.0,
        ((K,),),
    ),
    Case(
        "axis_reductions",
        lambda x: (
            jnp.sum(jnp.sum(x, axis=1) ** 2)
            + jnp.sum(jnp.max(x, axis=0))
            + jnp.sum(jnp.mean(x, axis=1, keepdims=True) * 2.0)
            + jnp.sum(jnp.min(x, axis=1))
        ),
        lambda x: (
            jnp.sum(jnp.sum(x, axis=1) ** 2)
            + jnp.sum(jnp.max(x, axis=0))
            + jnp.sum(jnp.mean(x, axis=1, keepdims=True) * 2.0)
            + jnp.sum(jnp.min(x, axis=1))
        ),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "softmax_family",
        lambda x: (
            jnp.sum(jax.nn.softmax(x, axis=1) * x)
            + jnp.sum(jax.nn.logsumexp(x, axis=0))
            + jnp.sum(jax.nn.log_softmax(x, axis=0) * 0.1)
        ),
        lambda x: (
            jnp.sum(jax.nn.softmax(x, axis=1) * x)
            + jnp.sum(jax.nn.logsumexp(x, axis=0))
            + jnp.sum(jax.nn.log_softmax(x, axis=0) * 0.1)
        ),
        ((M, K),),
        scalar_out=True,
    ),
    Case(
        "variance",
        lambda x: jnp.sum(jnp.var(x, axis=0)) + jnp.var(x),
        lambda x: jnp.sum(jnp.var(x, axis=0)) + jnp.var(x),
        ((M, K),),
        scalar_out=True,
    ),
    Case("outer", jask.outer, jnp.outer, ((M,), (K,))),
    Case(
        "stop_gradient",
        lambda x: x * jax.lax.stop_gradient(x * 2.0) + x,
        lambda x: x * jax.lax.stop_gradient(x * 2.0) + x,
        ((M, K),),
    ),
    Case(
        "einsum_two_layer",
        lambda x, w1, w2: jnp.einsum("ij,jk->ik", jax.nn.relu(jnp.einsum("ij,kj->ik", x, w1)), w2),
        lambda x, w1, w2: jnp.einsum("ij,jk->ik", jax.nn.relu(jnp.einsum("ij,kj->ik", x, w1)), w2),
        ((M, K), (N, K), (N, 7)),
    ),
    Case(
        "einsum_vectors_and_transpose",
        lambda x, v: jnp.einsum("ij,j->i", jnp.einsum("ij->ji", x), v),
        lambda x, v: jnp.einsum("ij,j->i", jnp.einsum("ij->ji", x), v),
        ((M, K), (M,)),
    ),
    Case(
        "seed_pipeline",
        lambda a, b, c, t: jask.sum(jask.square(jask.sub(jask.dot(jask.dot(a, b), c), t))),
        lambda a, b, c, t: jnp.sum(jnp.square(a @ b @ c - t)),
        ((M, 19), (19, 23), (23, 7), (M, 7)),
        scalar_out=True,
    ),
]
# Cases of the shape, gather and batched-matmul ops live in their own modules.
CASES += (
    cases_shapes.CASES
    + cases_gather.CASES
    + cases_batched.CASES
    + cases_elementwise.CASES
    + cases_scan_sort.CASES
)


def make_inputs(case, rng):
    dense = [rng.uniform(-1, 1, s).astype(np.float32) for s in case.shapes]
    return dense, [jask.DiskArray.from_numpy(x) for x in dense]


def as_loss(case, fn, weight):
    """A scalar function of the operands: the case itself, or a weighted sum of its output."""
    if case.scalar_out:
        return fn
    return lambda *xs: weight(fn(*xs))


def losses(case, rng):
    out_shape = jax.eval_shape(
        case.ref, *[jax.ShapeDtypeStruct(s, jnp.float32) for s in case.shapes]
    ).shape
    w = rng.uniform(-1, 1, out_shape).astype(np.float32)
    w_disk = jask.DiskArray.from_numpy(w) if out_shape else None
    disk_weight = (lambda y: jask.vdot(y, w_disk)) if out_shape else (lambda y: y * w)
    return as_loss(case, case.fn, disk_weight), as_loss(case, case.ref, lambda y: jnp.vdot(y, w))


_references: dict = {}


def reference_value_and_grad(case, ref_loss, dense):
    """ref_loss's value and gradients at the in-memory inputs, jitted and computed once per case:
    each budget's test of a case draws the same inputs and weights (the rng fixture is seeded
    the same for every test), and one compiled program per case instead of one per test (or
    one per primitive, eagerly) is most of the difference in this file's time."""
    key = (case.name, *(hashlib.sha256(x.tobytes()).hexdigest() for x in dense))
    if key not in _references:
        argnums = tuple(range(len(dense)))
        _references[key] = jax.jit(jax.value_and_grad(ref_loss, argnums))(*dense)
    return _references[key]


def assert_grads(grads, expected):
    for g, e in zip(grads, expected):
        assert isinstance(g, jask.DiskArray), f"gradient is {type(g).__name__}, not a DiskArray"
        assert_close(np.asarray(g), e)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_values_eager_and_jit(case, budget, rng):
    dense, disk = make_inputs(case, rng)
    expected = jax.jit(case.ref)(*dense)
    for fn in (case.fn, jax.jit(case.fn)):
        out = fn(*disk)
        if case.scalar_out:
            assert isinstance(out, jax.Array) and out.shape == ()
        else:
            assert isinstance(out, jask.DiskArray)
        assert_close(np.asarray(out), expected)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradients_every_order(case, gradient_budget, rng):
    """Eager `grad` and jitted `value_and_grad` at every budget; at the smallest, where every op
    streams many blocks, also `jit(grad)`, `grad(jit)` and eager `value_and_grad` (how the
    transformations compose does not depend on the budget; the blocks do)."""
    dense, disk = make_inputs(case, rng)
    loss, ref_loss = losses(case, rng)
    argnums = tuple(range(len(disk)))
    expected_value, expected = reference_value_and_grad(case, ref_loss, dense)
    assert_grads(jax.grad(loss, argnums=argnums)(*disk), expected)
    value, grads = jax.jit(jax.value_and_grad(loss, argnums=argnums))(*disk)
    assert_close(value, expected_value)
    assert_grads(grads, expected)
    if gradient_budget != SMALLEST_GRADIENT_BUDGET:
        return
    assert_grads(jax.jit(jax.grad(loss, argnums=argnums))(*disk), expected)
    assert_grads(jax.grad(jax.jit(loss), argnums=argnums)(*disk), expected)
    value, grads = jax.value_and_grad(loss, argnums=argnums)(*disk)
    assert_close(value, expected_value)
    assert_grads(grads, expected)


@pytest.mark.parametrize("argnums", [0, 1, (0,), (2,), (0, 2), (3, 1)])
def test_seed_pipeline_any_argnums(argnums, rng):
    case = next(c for c in CASES if c.name == "seed_pipeline")
    dense, disk = make_inputs(case, rng)
    expected = jax.grad(case.ref, argnums=argnums)(*dense)
    for grad_fn in (
        jax.grad(case.fn, argnums=argnums),
        jax.jit(jax.grad(case.fn, argnums=argnums)),
        jax.grad(jax.jit(case.fn), argnums=argnums),
    ):
        got = grad_fn(*disk)
        if isinstance(argnums, int):
            got, want = (got,), (expected,)
        else:
            want = expected
        assert_grads(got, want)


def test_many_blocks_per_op_at_smallest_budget(small_budget, rng):
    """The 4KB budget really streams every op in 50 or more blocks on the test shapes."""
    small_budget("4KB")
    x, y = (
        jask.DiskArray.from_numpy(rng.uniform(-1, 1, (M, K)).astype(np.float32)) for _ in range(2)
    )
    w = jask.DiskArray.from_numpy(rng.uniform(-1, 1, (K, N)).astype(np.float32))
    ops = {
        "add": lambda: x + y,
        "mul": lambda: x * y,
        "scale": lambda: x * 2.0,
        "square": lambda: jask.square(x),
        "sum": lambda: jask.sum(x),
        "vdot": lambda: jask.vdot(x, y),
        "dot": lambda: jask.dot(x, w),
        "transpose": lambda: x.T,
        "full": lambda: jask.full((M, K), 1.0),
    }
    for name, run in ops.items():
        before = _engine.pipeline_tasks_run()
        run()
        blocks = _engine.pipeline_tasks_run() - before
        assert blocks >= 50, f"{name} streamed only {blocks} blocks"


def test_cotangents_of_reused_input_are_summed(rng):
    x_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)

    def f(x):
        return jask.sum(x * 3.0) + jask.vdot(x, x) + jask.sum(jask.square(x))

    expected = jax.grad(lambda x: jnp.sum(x * 3.0) + jnp.vdot(x, x) + jnp.sum(x * x))(x_np)
    assert_grads([jax.grad(f)(x), jax.jit(jax.grad(f))(x)], [expected, expected])


def test_traced_scalar_argument_and_its_gradient(rng):
    x_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    scaled = jax.jit(lambda x, s: x * s)(x, 2.0)
    assert_close(np.asarray(scaled), x_np * 2.0)
    grad_s = jax.grad(lambda x, s: jask.sum(jask.square(x * s)), argnums=1)(x, 0.5)
    assert_close(grad_s, jax.grad(lambda x, s: jnp.sum((x * s) ** 2), argnums=1)(x_np, 0.5))


def test_from_numpy_of_a_traced_value_has_a_gradient(rng):
    w_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)

    def f(w):
        return jask.sum(jask.square(jask.DiskArray.from_numpy(w * 2.0)))

    expected = jax.grad(lambda w: jnp.sum((w * 2.0) ** 2))(w_np)
    assert_close(jax.grad(f)(w_np), expected)
    assert_close(jax.jit(jax.grad(f))(w_np), expected)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_mode_and_checkpoint(case, rng):
    """jax.jvp, jax.linearize, jax.checkpoint and forward-over-reverse Hessian-vector products."""
    dense, disk = make_inputs(case, rng)
    tangents = [rng.uniform(-1, 1, x.shape).astype(np.float32) for x in dense]
    disk_tangents = [jask.DiskArray.from_numpy(t) for t in tangents]
    loss, ref_loss = losses(case, rng)
    argnums = tuple(range(len(disk)))

    @jax.jit
    def in_memory(dense, tangents):
        value, tangent = jax.jvp(ref_loss, dense, tangents)
        hvp = jax.jvp(jax.grad(ref_loss, argnums=argnums), dense, tangents)[1]
        return value, tangent, jax.grad(ref_loss, argnums=argnums)(*dense), hvp

    ref_value, ref_tangent, expected, ref_hvp = in_memory(dense, tangents)
    value, tangent = jax.jvp(loss, disk, disk_tangents)
    assert_close(value, ref_value)
    assert_close(tangent, ref_tangent)
    _, linear = jax.linearize(loss, *disk)
    assert_close(linear(*disk_tangents), ref_tangent)
    assert_grads(jax.grad(jax.checkpoint(loss), argnums=argnums)(*disk), expected)
    assert_grads(jax.jit(jax.grad(jax.checkpoint(loss), argnums=argnums))(*disk), expected)
    hvp = jax.jvp(jax.grad(loss, argnums=argnums), disk, disk_tangents)[1]
    assert_grads(hvp, ref_hvp)


def test_reverse_over_reverse_hessian_vector_product(rng):
    x_np, v_np = (rng.uniform(-1, 1, (M, K)).astype(np.float32) for _ in range(2))
    x, v = jask.DiskArray.from_numpy(x_np), jask.DiskArray.from_numpy(v_np)
    f = lambda x: jask.sum(jnp.exp(x) * x)  # noqa: E731
    ref = lambda x: jnp.sum(jnp.exp(x) * x)  # noqa: E731
    expected = jax.grad(lambda x: jnp.vdot(jax.grad(ref)(x), v_np))(x_np)
    for hvp in (
        jax.grad(lambda x: jask.vdot(jax.grad(f)(x), v)),
        jax.jit(jax.grad(lambda x: jask.vdot(jax.grad(f)(x), v))),
    ):
        assert_grads([hvp(x)], [expected])
    second = jax.grad(jax.grad(lambda s: jask.sum(jnp.exp(x * s))))(0.3)
    assert_close(second, jax.grad(jax.grad(lambda s: jnp.sum(jnp.exp(x_np * s))))(0.3))


def test_gradient_with_respect_to_an_in_memory_bias(rng):
    x_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    loss = lambda b, x: jnp.sum(jnp.square(x * b - b))  # noqa: E731
    expected = jax.grad(loss)(BIAS, x_np)
    for grad_fn in (jax.grad(loss), jax.jit(jax.grad(loss)), jax.grad(jax.jit(loss))):
        got = grad_fn(BIAS, x)
        assert isinstance(got, jax.Array)
        assert_close(got, expected)


def test_large_axis_reductions_stay_on_disk(rng, monkeypatch):
    import jask._api.operands

    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    x_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    for fn in (
        lambda x: jask.sum(x, axis=1),
        jax.jit(lambda x: jask.max(x, axis=0, keepdims=True)),
    ):
        out = fn(x)
        assert isinstance(out, jask.DiskArray)
    assert_close(np.asarray(jask.sum(x, axis=1)), x_np.sum(1))
    assert_close(np.asarray(jask.max(x, axis=0, keepdims=True)), x_np.max(0, keepdims=True))


def test_max_and_min_reductions(rng):
    x_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    for fn in (lambda x: (jask.max(x), jask.min(x)), jax.jit(lambda x: (jnp.max(x), jnp.min(x)))):
        top, bottom = fn(x)
        assert float(top) == x_np.max() and float(bottom) == x_np.min()


def test_large_logsumexp_and_softmax_stay_on_disk_with_gradients(rng, monkeypatch):
    """Along an axis whose result exceeds IN_MEMORY_LIMIT the max is a DiskArray; its stop_gradient
    must work and the gradients must still match."""
    import jask._api.operands

    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    x_np = rng.uniform(-2, 2, (M, K)).astype(np.float32)
    x = jask.DiskArray.from_numpy(x_np)
    w = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    w_disk = jask.DiskArray.from_numpy(w)

    def loss(x):
        return jask.vdot(jask.softmax(x, axis=1), w_disk) + jask.sum(jask.logsumexp(x, axis=1))

    def ref(x):
        return jnp.vdot(jax.nn.softmax(x, axis=1), w) + jnp.sum(jax.nn.logsumexp(x, axis=1))

    assert isinstance(jask.logsumexp(x, axis=1), jask.DiskArray)
    assert_close(np.asarray(jask.logsumexp(x, axis=1)), jax.nn.logsumexp(x_np, axis=1))
    expected = jax.grad(ref)(x_np)
    for grad_fn in (jax.grad(loss), jax.jit(jax.grad(loss))):
        assert_grads([grad_fn(x)], [expected])
    stopped = jax.grad(lambda x: jask.vdot(jax.lax.stop_gradient(x), x))(x)
    assert_close(np.asarray(stopped), x_np)


def test_prod_gradient_is_exact_at_zeros(rng, small_budget):
    """d prod / d x_i is the product of the other elements: also where x_i or another element is
    zero (prod / x would divide by zero there). Rows and columns hold no, one and two zeros; the
    full products have one zero (a gradient that is nonzero only there) and three."""
    small_budget("4KB")
    x_np = (rng.uniform(-1, 1, (23, 13)) * 0.3 + 1.0).astype(np.float32)
    x_np[1, 4] = x_np[2, 0] = x_np[2, 9] = x_np[5, 4] = 0.0
    one_zero = x_np.copy()
    one_zero[2, 0] = one_zero[2, 9] = one_zero[5, 4] = 0.5
    w0, w1 = rng.uniform(-1, 1, 13).astype(np.float32), rng.uniform(-1, 1, 23).astype(np.float32)
    cases = [
        (lambda x: jnp.sum(jnp.prod(x, axis=1) * w1), x_np),
        (lambda x: jnp.sum(jnp.prod(x, axis=0) * w0), x_np),
        (lambda x: jnp.prod(x * 0.5), one_zero),
        (jnp.prod, x_np),
    ]
    for loss, inputs in cases:
        expected = jax.grad(loss)(inputs)
        x = jask.DiskArray.from_numpy(inputs)
        for grad_fn in (jax.grad(loss), jax.jit(jax.grad(loss))):
            assert_grads([grad_fn(x)], [expected])
    assert np.count_nonzero(jax.grad(jnp.prod)(one_zero)) == 1
    x = jask.DiskArray.from_numpy(x_np)
    assert_close(jask.prod(x, axis=1), np.prod(x_np, axis=1))
    assert float(jask.prod(x)) == 0.0


def test_prod_second_derivative_is_exact_at_a_lone_zero(rng, small_budget):
    """Hessian-vector products of prod (forward over reverse) where one element of each row, or
    of the whole array, is zero: the zero's own slope (the product of the others) must not vary
    with that zero, so the Hessian's diagonal is 0 there, as jax.hessian of jnp.prod gives."""
    small_budget("4KB")
    x_np = (rng.uniform(-1, 1, (17, 5)) * 0.3 + 1.0).astype(np.float32)
    x_np[np.arange(17), rng.integers(0, 5, 17)] = 0.0
    v_np = rng.uniform(-1, 1, (17, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, 17).astype(np.float32)
    whole = x_np[:2].copy()
    whole[1] = 0.5 + np.arange(5, dtype=np.float32) / 10  # one zero in all of it
    for loss, inputs, v in (
        (lambda x: jnp.sum(jnp.prod(x, axis=1) * w), x_np, v_np),
        (jnp.prod, whole, v_np[:2]),
    ):

        def hvp(x, v, loss=loss):
            return jax.jvp(jax.grad(loss), (x,), (v,))[1]

        expected = hvp(jnp.asarray(inputs), jnp.asarray(v))
        got = hvp(jask.DiskArray.from_numpy(inputs), jask.DiskArray.from_numpy(v))
        assert_grads([got], [expected])


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_sin_cos_prod_on_other_float_dtypes(dtype, rng):
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rtol = {"float64": 1e-12, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    x_np = (rng.uniform(-1, 1, (19, 13)) * 0.2 + 1.0).astype(dt)
    ref = x_np.astype(np.float64)
    with jax.enable_x64(dtype == "float64"):  # JAX computes float64 only with x64
        x = jask.DiskArray.from_numpy(x_np)
        for fn, np_fn in ((jask.sin, np.sin), (jask.cos, np.cos)):
            out = fn(x)
            assert out.dtype == dt
            assert_close(np.asarray(out).astype(np.float64), np_fn(ref), rtol)
        assert_close(
            np.asarray(jask.prod(x, axis=0)).astype(np.float64), np.prod(ref, axis=0), rtol
        )
        assert_close(float(jask.prod(x)), float(np.prod(ref)), max(rtol, 1e-6) * 10)
