"""jax.lax.dot_general on DiskArrays (jask/_api/lax_shape.py, jask.linalg.dot_general): any
contracting and batch axes, a DiskArray on either side or both, preferred_element_type; the
jax.numpy products built on it (einsum, tensordot, inner, matmul, ...) and flax.linen.Dense.
Values and dtypes against jax.numpy, eager and under jit, and gradients and JVPs against
jax.grad and jax.jvp of the same function on jnp arrays."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import assert_close

einsum = jnp.einsum

# (spec, operand shapes): shapes not multiples of any block or tile size
SPECS = [
    ("ij,ij->", ((37, 23), (37, 23))),
    ("bij,bjk->bik", ((5, 37, 23), (5, 23, 11))),
    ("ij,kj->ik", ((37, 23), (19, 23))),
    ("i,i->", ((23,), (23,))),
    ("ij,j->i", ((37, 23), (23,))),
    ("j,ij->i", ((23,), (37, 23))),
    ("bhqd,bhkd->bhqk", ((3, 2, 17, 9), (3, 2, 13, 9))),
    ("ij,ik->jk", ((37, 23), (37, 7))),
    ("bi,bi->b", ((37, 23), (37, 23))),
    ("ijk,kj->i", ((7, 11, 13), (13, 11))),
    ("bij,jk->bki", ((4, 9, 23), (23, 6))),
]
SIDES = {"both": (True, True), "lhs": (True, False), "rhs": (False, True)}


def operands(rng, shapes, sides):
    dense = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    args = [
        jask.DiskArray.from_numpy(x) if disk else jnp.asarray(x) for x, disk in zip(dense, sides)
    ]
    return dense, args


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("spec,shapes", SPECS, ids=[s for s, _ in SPECS])
def test_einsum_values_and_dtypes(spec, shapes, side, rng, small_budget):
    small_budget("4KB")
    dense, args = operands(rng, shapes, SIDES[side])
    expected = einsum(spec, *dense)
    for fn in (lambda *xs: einsum(spec, *xs), jax.jit(lambda *xs: einsum(spec, *xs))):
        out = fn(*args)
        assert out.shape == expected.shape and out.dtype == expected.dtype
        assert_close(np.asarray(out), expected, rtol=1e-4)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("spec,shapes", SPECS, ids=[s for s, _ in SPECS])
def test_einsum_gradients_and_jvp(spec, shapes, side, rng):
    dense, args = operands(rng, shapes, SIDES[side])
    out_shape = einsum(spec, *dense).shape
    w = jnp.asarray(rng.uniform(-1, 1, out_shape).astype(np.float32))

    def loss(a, b):
        return jnp.sum(jnp.sin(einsum(spec, a, b)) * w)

    expected = jax.grad(loss, argnums=(0, 1))(*map(jnp.asarray, dense))
    for grad in (jax.grad(loss, argnums=(0, 1)), jax.jit(jax.grad(loss, argnums=(0, 1)))):
        for g, e, arg in zip(grad(*args), expected, args):
            assert isinstance(g, jask.DiskArray) == isinstance(arg, jask.DiskArray)
            assert_close(np.asarray(g), e, rtol=1e-4)
    tangents = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    _, t_expected = jax.jvp(lambda a, b: einsum(spec, a, b), dense, tangents)
    t_args = [
        jask.DiskArray.from_numpy(t) if isinstance(a, jask.DiskArray) else jnp.asarray(t)
        for t, a in zip(tangents, args)
    ]
    _, t_out = jax.jvp(lambda a, b: einsum(spec, a, b), args, t_args)
    assert_close(np.asarray(t_out), t_expected, rtol=1e-4)


PRODUCTS = {
    "matmul_operator": lambda a, b: a @ b,
    "jnp.dot": jnp.dot,
    "jnp.matmul": jnp.matmul,
    "jnp.inner": jnp.inner,
    "jnp.tensordot": lambda a, b: jnp.tensordot(a, b, axes=([1, 2], [2, 0])),
    "jnp.tensordot_int": lambda a, b: jnp.tensordot(a.reshape(-1, 11), b.reshape(11, -1), axes=1),
}
PRODUCT_SHAPES = {
    "matmul_operator": ((5, 13, 11), (11, 7)),
    "jnp.dot": ((13, 11), (11, 7)),
    "jnp.matmul": ((5, 13, 11), (5, 11, 7)),
    "jnp.inner": ((13, 11), (7, 11)),
    "jnp.tensordot": ((3, 13, 11), (11, 7, 13)),
    "jnp.tensordot_int": ((13, 11), (11, 7)),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_jnp_products(name, rng):
    fn, shapes = PRODUCTS[name], PRODUCT_SHAPES[name]
    for sides in SIDES.values():
        dense, args = operands(rng, shapes, sides)
        expected = fn(*map(jnp.asarray, dense))
        for f in (fn, jax.jit(fn)):
            out = f(*args)
            assert out.shape == expected.shape and out.dtype == expected.dtype
            assert_close(np.asarray(out), expected, rtol=1e-4)
        grads = jax.grad(lambda a, b: jnp.sum(jnp.tanh(fn(a, b))), argnums=(0, 1))(*args)
        want = jax.grad(lambda a, b: jnp.sum(jnp.tanh(fn(a, b))), argnums=(0, 1))(*dense)
        for g, e in zip(grads, want):
            assert_close(np.asarray(g), e, rtol=1e-4)


def test_vdot_outer_and_vectors(rng):
    u, v = (rng.uniform(-1, 1, 29).astype(np.float32) for _ in range(2))
    du, dv = jask.DiskArray.from_numpy(u), jask.DiskArray.from_numpy(v)
    for fn in (jnp.vdot, jnp.outer, jnp.inner):
        expected = fn(jnp.asarray(u), jnp.asarray(v))
        for f in (fn, jax.jit(fn)):
            out = f(du, dv)
            assert out.shape == expected.shape and out.dtype == expected.dtype
            assert_close(np.asarray(out), expected, rtol=1e-5)


def test_preferred_element_type_and_mixed_dtypes(rng):
    a = rng.uniform(-1, 1, (37, 23)).astype(np.float32)
    b = rng.uniform(-1, 1, (23, 11)).astype(np.float32)
    numbers = (((1,), (0,)), ((), ()))
    bf16 = [jnp.asarray(x, jnp.bfloat16) for x in (a, b)]
    disk = [jask.DiskArray.from_numpy(np.asarray(x)) for x in bf16]
    for preferred in (None, jnp.float32):
        expected = jax.lax.dot_general(*bf16, numbers, preferred_element_type=preferred)
        out = jax.lax.dot_general(disk[0], bf16[1], numbers, preferred_element_type=preferred)
        assert out.dtype == expected.dtype
        assert_close(np.asarray(out, np.float32), np.asarray(expected, np.float32), rtol=2e-2)
    ints = [np.arange(x.size, dtype=np.int32).reshape(x.shape) % 7 for x in (a, b)]
    expected = jax.lax.dot_general(*ints, numbers)
    out = jax.jit(lambda x, y: jax.lax.dot_general(x, y, numbers))(
        jask.DiskArray.from_numpy(ints[0]), ints[1]
    )
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(out), expected)
    # jnp promotes int32 @ float32 before binding dot_general
    out = jask.DiskArray.from_numpy(ints[0]) @ jnp.asarray(b)
    assert out.dtype == (ints[0] @ jnp.asarray(b)).dtype


def test_dimension_number_errors_name_the_operands(rng):
    x = jask.DiskArray.from_numpy(np.ones((4, 3), np.float32))
    with pytest.raises(TypeError, match=r"contracting dimensions.*float32\[4,3\] DiskArray"):
        jax.lax.dot_general(x, jnp.ones((5, 3)), (((1,), (0,)), ((), ())))


flax_linen = pytest.importorskip("flax.linen")


@pytest.mark.parametrize("disk_part", ["kernel", "input"])
def test_flax_dense(disk_part, rng, small_budget):
    small_budget("64KB")
    x = rng.uniform(-1, 1, (53, 29)).astype(np.float32)
    kernel = rng.uniform(-1, 1, (29, 13)).astype(np.float32)
    bias = rng.uniform(-1, 1, 13).astype(np.float32)
    layer = flax_linen.Dense(13)

    def loss(params, x):
        return jnp.sum(jnp.tanh(layer.apply({"params": params}, x)))

    dense_params = {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}
    expected = layer.apply({"params": dense_params}, jnp.asarray(x))
    expected_grads = jax.grad(loss)(dense_params, jnp.asarray(x))
    if disk_part == "kernel":
        params, inputs = {**dense_params, "kernel": jask.DiskArray.from_numpy(kernel)}, x
    else:
        params, inputs = dense_params, jask.DiskArray.from_numpy(x)
    for apply in (layer.apply, jax.jit(layer.apply)):
        out = apply({"params": params}, inputs)
        assert out.dtype == expected.dtype
        assert_close(np.asarray(out), expected, rtol=1e-4)
    for grad in (jax.grad(loss), jax.jit(jax.grad(loss))):
        grads = grad(params, inputs)
        for name in ("kernel", "bias"):
            assert_close(np.asarray(grads[name]), expected_grads[name], rtol=1e-4)
