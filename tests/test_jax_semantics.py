"""Jask's results against jax.numpy's on in-memory jax.Arrays: dtype promotion over every pair of
stored dtypes (weak Python scalars too), bool products, float64 while jax_enable_x64 is off,
broadcasting, hashing, and plain JAX left as it is by `import jask` (issue 33)."""

import itertools
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import jask

STORED = ["float32", "float64", "float16", "bfloat16", "int32", "bool"]


def values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.4
    if dtype == "int32":
        return rng.integers(-3, 4, shape).astype(np.int32)
    return rng.uniform(-2, 2, shape).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def disk(a):
    return jask.DiskArray.from_numpy(a)


# Each op on (a (2,3), b (3,2)): the binary ops take b transposed, so both operands have a
# DiskArray's shape and the result is that of jnp on the same values.
BINARY = {
    "dot": lambda a, b: jnp.dot(a, b),
    "matmul": lambda a, b: a @ b,
    "dot_general": lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
    "lax.dot": lambda a, b: lax.dot(a, b),
    "einsum": lambda a, b: jnp.einsum("ij,jk->ik", a, b),
    "add": lambda a, b: a + b.T,
    "mul": lambda a, b: jnp.multiply(a, b.T),
    "where": lambda a, b: jnp.where(a.astype(bool), a, b.T),
    "concatenate": lambda a, b: jnp.concatenate([a, b.T]),
}


def check_same(got, want, what, weak=True):
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if weak:
        assert getattr(got, "weak_type", False) == getattr(want, "weak_type", False), what
    g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    tol = 0 if want.dtype in (np.int32, np.bool_) else 2e-2
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=str(what))


def _check_pairs(dtypes, involving=None):
    for da, db in itertools.product(dtypes, repeat=2):
        if involving is not None and not {da, db} & involving:
            continue
        a, b = values(da, (2, 3), 1), values(db, (3, 2), 2)
        ja, jb = jnp.asarray(a), jnp.asarray(b)
        wants = {name: f(ja, jb) for name, f in BINARY.items()}
        for name, f in BINARY.items():
            check_same(f(disk(a), disk(b)), wants[name], (name, da, db, "eager"))
            check_same(f(disk(a), jb), wants[name], (name, da, db, "disk-memory"))
        # every op in one program per pair (one compilation each)
        gots = jax.jit(lambda x, y: {n: f(x, y) for n, f in BINARY.items()})(disk(a), disk(b))
        for name in BINARY:
            check_same(gots[name], wants[name], (name, da, db, "jit"))


def test_every_pair_of_stored_dtypes_promotes_as_jax_with_x64():
    # the pairs x64 can change: those with a float64 or an int32 (the test below has the others)
    with jax.enable_x64(True):
        _check_pairs(STORED, involving={"float64", "int32"})


def test_every_pair_of_stored_dtypes_promotes_as_jax_without_x64():
    _check_pairs([d for d in STORED if d != "float64"])


@pytest.mark.parametrize("dtype", STORED)
def test_python_scalars_are_weak_as_in_jax(dtype):
    with jax.enable_x64(dtype == "float64"):
        a = values(dtype, (2, 3))
        ops = {
            "add_float": lambda x: x + 1.5,
            "radd_int": lambda x: 2 + x,
            "mul_int": lambda x: x * 3,
            "where_scalar": lambda x: jnp.where(x > 0, x, 0.5),
            "sub_bool": lambda x: x - True if x.dtype != bool else x | True,
            "full_like": lambda x: jnp.full_like(x, 2),
        }
        for name, f in ops.items():
            want = f(jnp.asarray(a))
            check_same(f(disk(a)), want, (name, dtype))
            check_same(jax.jit(f)(disk(a)), want, (name, dtype, "jit"))


def test_an_int_disk_array_plus_a_python_float_is_weak_as_in_jax():
    a = values("int32", (2, 3))
    assert (jnp.asarray(a) + 1.5).weak_type
    assert (disk(a) + 1.5).weak_type


def test_unstorable_dtypes_are_refused_with_the_stored_dtypes_named():
    for dtype in (ml_dtypes.int4, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu):
        name = np.dtype(dtype).name
        with pytest.raises(TypeError, match=f"{name}.*Jask stores float32.*int16"):
            disk(np.ones((3, 2), dtype))
    # int16, stored since issue 33: its values, and XLA's wraparound in an op on them.
    a = np.array([[-32768, -1], [0, 1], [32766, 32767]], np.int16)
    x = disk(a)
    assert x.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(x), a)
    got, want = x + x, jnp.asarray(a) + jnp.asarray(a)
    assert got.dtype == want.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_bool_products_are_any_of_and():
    a, b = values("bool", (4, 5), 3), values("bool", (5, 3), 4)
    for f in (
        lambda x, y: x @ y,
        lambda x, y: jnp.dot(x, y),
        lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))),
        lambda x, y: jnp.einsum("ij,jk->ik", x, y),
        lambda x, y: jnp.dot(x[0], y[:, 0]),  # every axis contracted
    ):
        want = f(jnp.asarray(a), jnp.asarray(b))
        check_same(f(disk(a), disk(b)), want, "eager")
        check_same(jax.jit(f)(disk(a), disk(b)), want, "jit")
    ones = disk(np.ones((2, 3), bool)) @ disk(np.ones((3, 2), bool))
    assert ones.dtype == np.bool_ and np.asarray(ones).all()


def test_lax_dot_of_mixed_dtypes_is_xlas_rule_not_numpys():
    x, y = np.ones((2, 3), np.int32), np.ones((3, 2), np.float16)
    got = lax.dot(disk(x), disk(y))
    assert got.dtype == lax.dot(jnp.asarray(x), jnp.asarray(y)).dtype == np.float16
    got = lax.dot(disk(x), disk(y), preferred_element_type=np.float32)
    assert got.dtype == np.float32


# -- float64 while jax_enable_x64 is off ---------------------------------------------------------


def test_float64_data_without_x64_is_float32_as_jnp_asarray(tmp_path):
    data = np.linspace(-1, 1, 12).reshape(3, 4)
    assert jnp.asarray(data).dtype == np.float32
    for x in (disk(data), jask.full((3, 4), 0.5, "float64")):
        assert x.dtype == np.float32
    x = disk(data)
    np.testing.assert_array_equal(np.asarray(x), data.astype(np.float32))
    for f in (jnp.sin, lambda v: v + 1, lambda v: v * 2.0, jnp.sum, lambda v: v.astype("float16")):
        check_same(f(x), f(jnp.asarray(data)), "float64 input")
        check_same(jax.jit(f)(x), f(jnp.asarray(data)), "float64 input, jit")
    assert disk(np.arange(3)).dtype == jnp.asarray(np.arange(3)).dtype == np.int32


def test_a_float64_file_without_x64_reads_as_float32_and_is_left_as_it_is(tmp_path):
    path = tmp_path / "f64.npy"
    data = np.linspace(-1, 1, 12).reshape(3, 4)
    np.save(path, data)
    before = path.read_bytes()
    x = jask.DiskArray.open(path)
    assert x.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(x), data.astype(np.float32))
    with pytest.raises(TypeError, match=r"float64.*jax_enable_x64.*mode='r'"):
        jask.DiskArray.open(path, mode="r+")
    raw = jask.DiskArray.open(path, shape=(12,), dtype="float64", offset=128)
    assert raw.dtype == np.float32
    assert path.read_bytes() == before
    with jax.enable_x64(True):
        y = jask.DiskArray.open(path, mode="r+")
        assert y.dtype == jnp.sin(y).dtype == (y + 1).dtype == np.float64
        np.testing.assert_array_equal(np.asarray(y), data)


# -- broadcasting, hashing -------------------------------------------------------------------


def test_broadcast_arrays_gives_every_operand_the_result_shape():
    a, b = np.ones((3, 1)), np.arange(4, dtype=np.float32).reshape(1, 4)
    want = jnp.broadcast_arrays(a, jnp.asarray(b))
    for f in (jnp.broadcast_arrays, jax.jit(jnp.broadcast_arrays)):
        got = f(a, disk(b))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check_same(g, w, "broadcast_arrays")


def test_where_of_a_disk_array_and_a_scalar_keeps_values():
    a = values("float32", (3, 4))
    want = jnp.where(a > 0, a, 0.0)
    check_same(jnp.where(disk(a) > 0, disk(a), 0.0), want, "where")
    check_same(jnp.sum(jnp.asarray(a), where=a > 0), jnp.sum(disk(a), where=a > 0), "where=")


def test_disk_arrays_are_unhashable_as_jax_arrays():
    x, j = disk(np.ones(3, np.float32)), jnp.ones(3)
    for v in (x, j):
        with pytest.raises(TypeError, match="unhashable type"):
            hash(v)
    with pytest.raises(TypeError, match="unhashable type"):
        jax.jit(lambda v: hash(v))(x)

    def static_error(v):
        with pytest.raises(ValueError) as info:
            jax.jit(lambda s, y: y, static_argnums=0)(v, 1)
        return str(info.value)

    got, want = static_error(x), static_error(j)
    assert got.startswith("Non-hashable static arguments are not supported")
    assert want.startswith("Non-hashable static arguments are not supported")


def test_operations_keyed_on_arrays_still_work():
    """Nothing in Jask hashed DiskArrays: jit, grad, vmap, scan and copies over them work."""
    x = disk(values("float32", (4, 3)))
    jax.jit(lambda v: (v * v).sum())(x)
    jax.grad(lambda v: (v * v).sum())(x)
    jax.vmap(lambda r: r * 2)(x)
    jax.lax.scan(lambda c, r: (c + r.sum(), None), 0.0, x)
    import copy

    copy.deepcopy({"a": x, "b": [x, x]})


# -- plain JAX is unchanged by `import jask` ----------------------------------------------------

# Every patched function of compat's registry called on values that are not DiskArrays: NumPy
# arrays, Python scalars, jax.Arrays and tracers (jit, grad, vmap), and inputs JAX refuses.
JAX_ONLY = textwrap.dedent(
    """
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    from jax import lax
    if sys.argv[1] == "jask":
        import jask
    cases = {
        "full_like_scalar": lambda: lax.full_like(1.0, 0, shape=()),
        "full_like_int": lambda: lax.full_like(3, 2),
        "full_like_np": lambda: lax.full_like(np.ones((2, 2)), 1, "int32"),
        "full_like_shape": lambda: lax.full_like(jnp.ones(3), 1.5, shape=(2,)),
        "zeros_like_jit": lambda: jax.jit(jnp.zeros_like)(jnp.ones((2, 3), "bfloat16")),
        "ones_like_grad": lambda: jax.grad(lambda x: (jnp.ones_like(x) * x).sum())(jnp.ones(3)),
        "full_like_vmap": lambda: jax.vmap(lambda x: lax.full_like(x, 2.0))(jnp.ones((2, 3))),
        "stop_gradient": lambda: jax.grad(lambda x: lax.stop_gradient(x) * x)(2.0),
        "where_np": lambda: jnp.where(np.ones(3) > 0, np.arange(3), 1.0),
        "where_scalar": lambda: jnp.where(True, 1, 2.0),
        "where_jit": lambda: jax.jit(jnp.where)(jnp.arange(3) > 0, jnp.ones((2, 1)), 0.0),
        "where_vmap": lambda: jax.vmap(lambda c, x: jnp.where(c, x, 0))(
            jnp.array([True, False]), jnp.ones((2, 3))),
        "where_bad": lambda: jnp.where(jnp.ones(3) > 0, jnp.ones(2), 0.0),
        "broadcast_arrays": lambda: jnp.broadcast_arrays(np.ones((3, 1)), jnp.ones((1, 4))),
        "broadcast_arrays_bad": lambda: jnp.broadcast_arrays(np.ones(3), jnp.ones(4)),
        "nansum_where": lambda: jnp.nansum(jnp.array([1.0, jnp.nan]), where=np.array([1, 1]) > 0),
        "device_put": lambda: jax.device_put(np.arange(3)),
        "device_put_tree": lambda: jax.device_put({"a": 1.0, "b": [np.ones(2)]}),
        "device_put_jit": lambda: jax.jit(lambda x: jax.device_put(x) * 2)(jnp.ones(2)),
        "device_get": lambda: jax.device_get({"a": jnp.ones(2), "b": 3}),
        "device_get_bad": lambda: jax.device_get(jax.jit(lambda x: x)),
        "scan": lambda: lax.scan(lambda c, x: (c + x, x * 2), 0.0, jnp.arange(4.0)),
        "scan_len": lambda: lax.scan(lambda c, x: (c, c), 0.0, None, length=3),
        "scan_bad": lambda: lax.scan(lambda c, x: (c, x), 0.0, (jnp.ones(2), jnp.ones(3))),
        "vmap_unbatched_out": lambda: jax.vmap(lambda x: 1.0, out_axes=0)(jnp.ones(3)),
        "jacrev": lambda: jax.jacrev(lambda x: x * 2)(jnp.ones(2)),
        "vjp": lambda: jax.vjp(jnp.sin, 1.0)[1](1.0),
        "checkpoint": lambda: jax.grad(jax.checkpoint(lambda x: jnp.sin(x) ** 2))(1.0),
        "isinstance_tracer": lambda: jax.jit(lambda x: float(isinstance(x, jax.Array)))(1.0),
        "jnp_sum_jit": lambda: jax.jit(jnp.sum).lower(jnp.ones(3)).compile()(jnp.ones(3)),
        "bad_primitive": lambda: lax.add(jnp.ones(2), jnp.ones(3)),
        "solve_hessian": lambda: jax.hessian(
            lambda x: jnp.linalg.solve(jnp.diag(x + 3.0), jnp.ones(2)).sum())(jnp.ones(2)),
        "linear_solve_grad": lambda: jax.grad(lambda b: lax.custom_linear_solve(
            lambda v: 2 * v, b, lambda mv, r: r / 2, symmetric=True).sum())(jnp.ones(2)),
        "eval_shape": lambda: list(jax.eval_shape(jnp.sin, jnp.ones(3)).shape),
        "cond": lambda: lax.cond(True, lambda x: x + 1, lambda x: x * 2, jnp.ones(2)),
        "cond_rev_rev": lambda: jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(lax.cond(
            x[0] < 2, lambda x: x * x, jnp.sin, x)))(x) ** 2))(jnp.array([1.7, 0.3])),
        "fori_loop": lambda: lax.fori_loop(0, 3, lambda i, c: c * 2, jnp.ones(2)),
        "conv": lambda: lax.conv(jnp.ones((1, 1, 4, 4)), jnp.ones((1, 1, 2, 2)), (1, 1), "SAME"),
        "searchsorted": lambda: jnp.searchsorted(jnp.arange(5.0), jnp.array([1.5, 3.0]), "right"),
        "histogram": lambda: jnp.histogram(jnp.arange(9.0), 3),
    }
    out = {}
    for name, f in cases.items():
        try:
            leaves = jax.tree.leaves(f())
            out[name] = [
                [str(np.asarray(v).dtype), bool(getattr(v, "weak_type", False)),
                 np.asarray(v, np.float64).tolist(), type(v).__name__]
                for v in leaves
            ]
        except Exception as e:
            out[name] = ["error", type(e).__name__, str(e)]
    print(json.dumps(out))
    """
)


def test_importing_jask_leaves_plain_jax_as_it_is():
    def run(mode):
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        done = subprocess.run(
            [sys.executable, "-c", JAX_ONLY, mode],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    plain, with_jask = run("plain"), run("jask")
    assert set(plain) == set(with_jask)
    for name in plain:
        assert with_jask[name] == plain[name], name
    # the covered patches: every one in compat's registry that changes a JAX function
    from jask._jax import compat

    assert set(compat.PATCHES) == {
        "lowering_passes",
        "vmap_broadcast",
        "primitive_dispatch",
        "library_jits_run_inline",
        "scan_length_of_disk_arrays",
        "traced_array_check",
        "device_put",
        "device_get",
        "full_like_of_disk_arrays",
        "scalar_init_values_in_memory",
        "where_keeps_disk_shapes",
        "searchsorted_of_disk_arrays",
        "vjp_in_memory_cotangents",
        "accumulate_in_memory_cotangents",
        "custom_jvp_disk_tangents",
        "disk_array_structs",
        "loop_carry_kinds",
        "flax_msgpack_budget",
        "lineax_disk_structs",
        "remat_outputs",
        "compiled_memory",
        "disk_boolean_masks",
        "disk_mask_updates",
        "empty_disk_residuals",
    }
