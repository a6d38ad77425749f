"""Regressions of the failures JAX's own tests found with DiskArrays (tests/conformance/), each
against the same function on jax.Arrays: values, dtypes and shapes exactly, gradients against
jax.grad/jax.jvp on jax.Arrays, eagerly and under jax.jit, at budgets small enough for many
blocks.

- an in-memory tangent of a DiskArray given to a program JAX lowers eagerly (a cond, switch or
  checkpointed scan under jax.jvp): the file written for it lived shorter than the program;
- complex scalars and int64/uint64 scalars past 2**53 reached the engine as doubles (fill
  values, padding values, elementwise operands);
- an empty boolean mask, and select_n of size-1 operands where XLA computes it (complex);
- custom_jvp rules whose tangents had another kind than their primals (det, slogdet), a 0-d
  DiskArray from indexing, and custom_linear_solve results of another kind than its
  right-hand side;
- a cond called through a name of JAX's own (jax._src.lax.cond: jax.scipy.linalg.expm) whose
  branches give a DiskArray and an in-memory array (complex expm: linalg_test testExpm).
"""

import gc
import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src import public_test_util
from jax.test_util import check_grads

import jask
from jask import _engine, _runtime

from conftest import DEFAULT_BUDGET


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def same(actual, expected):
    """Trees of results equal: kinds aside, shapes, dtypes and values (bitwise for complex and
    integers, NaN where NaN)."""
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        np.testing.assert_array_equal(a, e)


def close(actual, expected, rtol=1e-5, atol=1e-5):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


@pytest.fixture
def small():
    jask.set_memory_budget("16KB")
    yield
    jask.set_memory_budget(DEFAULT_BUDGET)


@pytest.fixture
def checks():
    """jax_enable_checks, as JAX's tests run: every value a jaxpr's variable receives is checked
    against its type (a DiskArrayTy variable given an in-memory array fails)."""
    with jax.enable_checks(True):
        yield


def live_after(fn):
    """The engine's live arrays after fn() and the releases it left behind."""
    fn()
    gc.collect()
    _runtime.release_after_programs()
    return _engine.live_arrays()


# -- a file written for an in-memory tangent lives until the program has read it -----------

BRANCHES = [lambda x: [jnp.sin(x[0]), x[1] * 2.0], lambda x: [jnp.cos(x[1]), jnp.exp(x[2])]]


@jax.jit
def switched(idx, x):
    return lax.switch(idx, BRANCHES, x)


@pytest.mark.parametrize("idx", [0, 1])
def test_jvp_of_jitted_switch_with_an_in_memory_tangent(small, idx):
    x = np.array([0.3, -1.2, 0.7], np.float32)
    t = np.array([1.0, 0.5, -2.0], np.float32)
    expected = jax.jvp(partial(switched, idx), (x,), (t,))
    d = disk(x)
    close(jax.jvp(partial(switched, idx), (d,), (t,)), expected)
    # and the file written for t goes once the program has run
    before = _engine.live_arrays()
    assert live_after(lambda: jax.jvp(partial(switched, idx), (d,), (t,))) == before


def test_switch_grad_with_forwarding(small):
    # JAX's testSwitchGradWithForwarding: branches forwarding some inputs to their outputs
    for seed, n_in, n_out in [(0, 1, 3)]:
        rng = np.random.RandomState(seed)
        in_perm, out_perm = rng.permutation(3), rng.permutation(3)

        def branch(s, inputs, n_in=n_in, n_out=n_out, in_perm=in_perm, out_perm=out_perm):
            inputs = [inputs[i] for i in in_perm]
            outputs = inputs[:n_in] + [
                s * jnp.exp(inputs[i]) if i < n_out else jnp.sin(inputs[i]) for i in range(3 - n_in)
            ]
            return [outputs[i] for i in out_perm]

        @jax.jit
        def f(idx, inputs, branch=branch):
            return lax.switch(idx, [partial(branch, i) for i in range(4)], inputs)

        x = np.arange(3.0, dtype=np.float32)
        t = np.array([0.5, -1.0, 2.0], np.float32)
        for idx in (0, 3):
            close(jax.jvp(partial(f, idx), (disk(x),), (t,)), jax.jvp(partial(f, idx), (x,), (t,)))
            out, vjp = jax.vjp(partial(f, idx), disk(x))
            ct = [np.float32(1.5), np.float32(-0.5), np.float32(2.0)]
            close(vjp(ct), jax.vjp(partial(f, idx), x)[1](ct))


def checkpointed_scan(f, c, xs):
    policy = jax.checkpoint_policies.everything_saveable
    return jax.checkpoint(partial(lax.scan, f), policy=policy)(c, xs)


def scan_body(c, a):
    b = jnp.cos(jnp.sum(jnp.sin(a)) + jnp.sum(jnp.cos(c)))
    return jnp.sin(c * b), b


@pytest.mark.parametrize("jit_f", [False, True])
def test_jvp_and_grad_of_jitted_checkpointed_scan(small, jit_f):
    # JAX's testScanJVP / testScanGrad with jax.checkpoint around the scan
    f = jax.jit(scan_body) if jit_f else scan_body
    scan = jax.jit(checkpointed_scan, static_argnums=(0,))
    rng = np.random.RandomState(0)
    c, xs = rng.randn(4).astype(np.float32), rng.randn(5, 3).astype(np.float32)
    tc, txs = rng.randn(4).astype(np.float32), rng.randn(5, 3).astype(np.float32)
    expected = jax.jvp(partial(scan, f), (c, xs), (tc, txs))
    close(jax.jvp(partial(scan, f), (disk(c), disk(xs)), (tc, txs)), expected, rtol=1e-4)

    def loss(c, xs):
        carry, ys = scan(f, c, xs)
        return jnp.sum(carry) + jnp.sum(ys**2)

    close(jax.grad(loss, (0, 1))(disk(c), disk(xs)), jax.grad(loss, (0, 1))(c, xs), rtol=1e-4)


# -- complex and 64-bit scalars: their exact values --------------------------------------

COMPLEX_SHAPES = [(300, 4), (3, 5), (0, 3)]


def complex_data(shape, seed=0):
    rng = np.random.RandomState(seed)
    return (rng.randn(*shape) + 1j * rng.randn(*shape)).astype(np.complex64)


COMPLEX_FNS = {
    "zeros_like": jnp.zeros_like,
    "ones_like": jnp.ones_like,
    "full_like": lambda a: jnp.full_like(a, 2.5 - 1.25j),
    "full_like_negative_zero_imag": lambda a: jnp.full_like(a, complex(3.0, -0.0)),
    "pad_zero": lambda a: jnp.pad(a, ((1, 0), (0, 2))),
    "pad_value": lambda a: jnp.pad(a, 1, constant_values=1 - 1j),
    "lax_pad_interior": lambda a: lax.pad(a, jnp.complex64(2j), ((1, 0, 1), (0, 1, 0))),
    "where_scalar": lambda a: jnp.where(jnp.real(a) > 0, a, 2 - 3j),
    "where_row": lambda a: jnp.where(jnp.imag(a) > 0, jnp.arange(a.shape[1]) * 1j, a),
}


@pytest.mark.parametrize(
    "name, shape",
    [
        (name, shape)
        for name in COMPLEX_FNS
        for shape in COMPLEX_SHAPES
        # (interior padding with a complex value is XLA's, in memory: not of a large array)
        if not (name == "lax_pad_interior" and shape == (300, 4))
    ],
    ids=str,
)
def test_complex_scalars(small, name, shape):
    f = COMPLEX_FNS[name]
    x = complex_data(shape)
    expected = f(jnp.asarray(x))
    same(f(disk(x)), expected)
    same(jax.jit(f)(disk(x)), expected)


def test_complex_full():
    for value in (0j, 1 + 2j, complex(-0.0, 0.0), complex(1.0, -0.0)):
        same(jask.full((3, 5), value, "complex64"), jnp.full((3, 5), value, jnp.complex64))
    same(jask.full((), 1 + 2j, "complex64"), jnp.full((), 1 + 2j, jnp.complex64))


def test_fftfreq_and_convolution_matrix_of_complex_diskarrays():
    # JAX's testFftfreq (zeros of a complex DiskArray in its jvp) and testConvolutionMatrix
    x, tangent = complex_data((7,)), complex_data((7,), seed=1)
    spectrum = lambda a: jnp.fft.fft(a) * jnp.fft.fftfreq(7)  # noqa: E731
    close(jax.jvp(spectrum, (disk(x),), (tangent,)), jax.jvp(spectrum, (x,), (tangent,)))
    for f in (
        lambda a: jax.scipy.linalg.convolution_matrix(a, 4, mode="full"),
        lambda a: jax.scipy.linalg.convolution_matrix(a, 9, mode="same"),
    ):
        close(f(disk(x)), f(jnp.asarray(x)), rtol=1e-5)
        close(jax.jit(f)(disk(x)), jax.jit(f)(jnp.asarray(x)), rtol=1e-5)


BIG = 2**60 + 1
INT64_FNS = {
    "add": lambda a: a + BIG,
    "mul": lambda a: a * np.int64(3),
    "where": lambda a: jnp.where(a % 2 == 0, a, -BIG),
    "maximum": lambda a: jnp.maximum(a, np.int64(BIG)),
    "full_like": lambda a: jnp.full_like(a, BIG),
    "pad": lambda a: jnp.pad(a, 1, constant_values=BIG),
    "pad_zero": lambda a: jnp.pad(a, ((1, 0), (0, 2))),
}


@pytest.mark.parametrize("name", INT64_FNS)
@pytest.mark.parametrize("shape", [(300, 4), (3, 5)], ids=str)
def test_int64_scalars_past_2_53(x64, small, name, shape):
    f = INT64_FNS[name]
    x = (np.arange(np.prod(shape)).reshape(shape) * (2**40 + 3)).astype(np.int64)
    expected = f(jnp.asarray(x))
    same(f(disk(x)), expected)
    same(jax.jit(f)(disk(x)), expected)


def test_uint64_scalars_past_2_53(x64, small):
    u = np.arange(1200, dtype=np.uint64).reshape(300, 4) + np.uint64(2**63)
    for f in (lambda a: a + np.uint64(2**63 + 7), lambda a: jnp.full_like(a, 2**64 - 1)):
        same(f(disk(u)), f(jnp.asarray(u)))
        same(jax.jit(f)(disk(u)), f(jnp.asarray(u)))


def test_a_traced_0d_value_written_to_a_diskarray():
    out = jax.jit(lambda v: jask.DiskArray.from_numpy(v * 2))(jnp.float32(3))
    assert out.shape == () and out.dtype == np.float32 and float(jask.materialize(out)) == 6.0


# -- masks and reductions as jnp ---------------------------------------------------------


@pytest.mark.parametrize(
    "x_shape, m_shape",
    [((3,), (0,)), ((3, 4), (0,)), ((3, 4), (0, 4)), ((3, 4), (3, 0)), ((3, 4, 5), (3, 0))],
)
def test_empty_boolean_mask(x_shape, m_shape):
    # JAX's testEmptyBooleanIndexing (jax-ml/jax#22886): a mask axis of size 0 selects nothing
    x = np.arange(np.prod(x_shape), dtype=np.int32).reshape(x_shape)
    m = np.empty(m_shape, dtype=bool)
    expected = jnp.asarray(x)[jnp.asarray(m)]
    same(disk(x)[disk(m)], expected)
    same(disk(x)[m], expected)


@pytest.mark.parametrize("m_shape", [(2, 4), (0, 5), (3, 3)])
def test_a_mask_of_another_shape_is_jnps_error(m_shape):
    x, m = np.arange(12, dtype=np.int32).reshape(3, 4), np.ones(m_shape, bool)
    with pytest.raises(IndexError) as expected:
        jnp.asarray(x)[jnp.asarray(m)]
    with pytest.raises(IndexError) as got:
        disk(x)[disk(m)]
    assert str(got.value) == str(expected.value)


NAN_REDUCTIONS = {
    "nansum": jnp.nansum,
    "nanprod": jnp.nanprod,
    "nanmax": jnp.nanmax,
    "nanmin": jnp.nanmin,
}


@pytest.mark.parametrize(
    "name, dtype",
    [(name, np.float32) for name in NAN_REDUCTIONS]
    + [("nansum", np.complex64), ("nanprod", np.complex64)],  # (jnp has no complex max, min)
    ids=str,
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_without_initial_over_zero_size_axes(name, dtype, keepdims):
    # JAX's testReducerNoInitialZeroDims: (0, 4) reduced along its non-empty axis
    f = partial(NAN_REDUCTIONS[name], axis=1, keepdims=keepdims)
    x = np.zeros((0, 4), dtype)
    expected = f(jnp.asarray(x))
    same(f(disk(x)), expected)
    same(jax.jit(f)(disk(x)), expected)


def test_complex_nansum_with_nans(small):
    x = complex_data((30, 4))  # (complex reductions are XLA's, in memory)
    x[::7, 1] = np.nan
    f = partial(jnp.nansum, axis=0, keepdims=True)
    close(f(disk(x)), f(jnp.asarray(x)), rtol=1e-5, atol=1e-4)


# -- custom_jvp tangents and custom_linear_solve results of their primals' kind -------------


def _det(a):
    return jnp.linalg.det(a)


def _logdet(a):
    return jnp.linalg.slogdet(a)[1]


def _matrix(shape, seed=0):
    a = np.random.RandomState(seed).randn(*shape) + 2 * np.eye(shape[-1])
    return a.astype(np.float32)


@pytest.mark.parametrize(
    "f, shape, modes",
    [
        (_det, (1, 1), ("fwd", "rev")),
        (_logdet, (1, 1), ("fwd", "rev")),
        (_logdet, (4, 4), ("fwd",)),
    ],
    ids=["det-1x1", "slogdet-1x1", "slogdet-4x4"],
)
def test_det_and_slogdet_check_grads(checks, f, shape, modes):
    # JAX's testDetGrad / testSlogdetGrad: check_grads of order 2 (a [1, 1] matrix's det is its
    # element, x[..., 0, 0]; slogdet's derivative solves with custom_linear_solve)
    public_test_util.check_grads(f, (disk(_matrix(shape)),), 2, modes, atol=1e-1, rtol=1e-1)


@pytest.mark.parametrize("f", [_det, _logdet], ids=["det", "slogdet"])
def test_det_and_slogdet_derivatives_as_jnp(f):
    a, t = _matrix((4, 4)), _matrix((4, 4), seed=1)
    close(jax.jvp(f, (disk(a),), (t,)), jax.jvp(f, (a,), (t,)), rtol=1e-4, atol=1e-4)
    out, vjp = jax.vjp(f, disk(a))
    close(vjp(np.float32(1.5)), jax.vjp(f, a)[1](np.float32(1.5)), rtol=1e-4, atol=1e-4)


def test_0d_result_of_indexing_is_in_memory():
    d = disk(np.array([[2.5]], np.float32))
    out = d[0, 0]
    assert not isinstance(out, jask.DiskArray) and out.shape == () and float(out) == 2.5
    assert not isinstance(d[..., 0, 0], jask.DiskArray)


@jax.custom_jvp
def doubled(x):
    return x * 2.0


@doubled.defjvp
def _doubled_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return doubled(x), t * 2.0


@jax.custom_jvp
def column_sums(x):
    return jnp.sum(x, axis=0)


@column_sums.defjvp
def _column_sums_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.sum(x, axis=0), jnp.sum(t * jnp.cos(x), axis=0)


@pytest.mark.parametrize("fn", [doubled, column_sums], ids=lambda f: f.__name__)
@pytest.mark.parametrize("tangent_on_disk", [False, True])
@pytest.mark.parametrize("jitted", [False, True])
def test_custom_jvp_tangents_have_their_primals_kind(small, fn, tangent_on_disk, jitted):
    x = np.arange(600, dtype=np.float32).reshape(200, 3) / 100
    t = np.random.RandomState(0).randn(200, 3).astype(np.float32)
    f = jax.jit(fn) if jitted else fn
    p, tan = jax.jvp(f, (disk(x),), (disk(t) if tangent_on_disk else t,))
    assert isinstance(p, jask.DiskArray) == isinstance(tan, jask.DiskArray)
    close((p, tan), jax.jvp(fn, (x,), (t,)), rtol=1e-5)
    grad = jax.grad(lambda a: jnp.sum(f(a) ** 2))
    close(grad(disk(x)), grad(x), rtol=1e-5)


def test_second_order_jvp_of_solve(checks):
    # custom_linear_solve's results have its right-hand side's kind (JAX's derivative rule
    # feeds them to the matvec function traced on that kind)
    a, b = _matrix((4, 4)), np.random.RandomState(1).randn(4, 3).astype(np.float32)

    def jvp2(a, b):
        return jax.jvp(lambda a: jax.jvp(jnp.linalg.solve, (a, b), (a, b))[1], (a,), (a,))

    expected = jvp2(a, b)
    for args in itertools.product((a, disk(a)), (b, disk(b))):
        close(jvp2(*args), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(20, 20), (2, 20, 20)])
def test_complex_expm_whose_cond_branches_differ_in_kind(shape):
    rng = np.random.default_rng(5)
    a = ((rng.normal(size=shape) + 1j * rng.normal(size=shape)) / 4).astype(np.complex64)
    want = jax.scipy.linalg.expm(jnp.asarray(a))
    f = jax.scipy.linalg.expm
    for got in (f(disk(a)), jax.jit(f)(disk(a))):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # and its gradient (a real loss of it), as jax.grad on jax.Arrays
    loss = lambda x: jnp.sum(jnp.abs(jax.scipy.linalg.expm(x)) ** 2)
    gw = jax.grad(loss)(jnp.asarray(a))
    np.testing.assert_allclose(np.asarray(jax.grad(loss)(disk(a))), gw, rtol=1e-4, atol=1e-4)


def test_every_module_of_jax_calls_the_unifying_loops_and_conds():
    # JAX's modules import cond, switch, scan and while_loop under several names; each must be
    # the carry-unifying version, and jnp.linalg.cond (a matrix's condition number) untouched
    import sys

    wrapped = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith(("jax.", "jaxlib.")):
            continue
        for attr in ("cond", "switch", "scan", "while_loop"):
            value = getattr(module, attr, None)
            if getattr(value, "__module__", "").startswith("jax._src.lax.control_flow"):
                assert hasattr(value, "_jask_original"), (name, attr)
                wrapped += 1
    assert wrapped >= 8
    assert not hasattr(jnp.linalg.cond, "_jask_original")


def test_vmapped_while_loop_whose_predicate_differs_per_element_with_disk_carries():
    # JAX lowers it by selecting each element's new or old carry, which a DiskArray handle
    # cannot be (an AssertionError in the lowering: linalg_test testPolarBatch)
    rng = np.random.default_rng(6)
    a = rng.normal(size=(3, 40, 30)).astype(np.float32)
    limits = np.array([2.0, 9.0, 40.0], np.float32)

    def halve_until_small(x, limit):
        def cond(c):
            x, n = c
            return jnp.max(jnp.abs(x)) > 1.0 / limit

        def body(c):
            x, n = c
            return x * 0.5, n + 1

        return jax.lax.while_loop(cond, body, (x, 0))

    f = jax.vmap(halve_until_small)
    want = f(jnp.asarray(a), limits)
    assert len(set(np.asarray(want[1]).tolist())) == 3  # the elements stop at different steps
    for got in (f(disk(a), limits), jax.jit(f)(disk(a), limits)):
        same(got, want)
    polar = partial(jax.scipy.linalg.polar, side="right")
    b = rng.normal(size=(3, 5, 3)).astype(np.float32)
    for got, want in zip(jax.jit(polar)(disk(b)), polar(jnp.asarray(b))):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


# -- derivatives through 0-d DiskArrays and of integer DiskArrays ----------------------------
# (lax_autodiff_test testPadGrad and testReduceGrad: a 0-d DiskArray's in-memory tangent reached
# a kernel that takes a DiskArray; lax_numpy_test testGradFrexp and testGradLdexp: an integer
# DiskArray had DiskArray tangents where JAX gives float0 ones, and float0 zeros were stored)


def _pad_by_a_0d_value(x, v):
    return lax.pad(x, v, [(1, 2, 1), (0, 3, 0)])


def _reduce_to_0d(x):
    return lax.reduce(x, np.float32(0), lax.add, (0, 1))


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("fn", [_pad_by_a_0d_value, _reduce_to_0d], ids=["pad", "reduce"])
def test_derivatives_through_a_0d_diskarray(small, fn, jitted):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(37, 23)).astype(np.float32)
    args = (x, np.array(0.5, np.float32)) if fn is _pad_by_a_0d_value else (x,)
    wrap = jax.jit if jitted else (lambda f: f)
    on_disk = tuple(disk(a) for a in args)
    in_memory = tuple(jnp.asarray(a) for a in args)
    tangents = tuple(jnp.asarray(rng.normal(size=np.shape(a)), np.float32) for a in args)
    close(wrap(partial(jax.jvp, fn))(on_disk, tangents), jax.jvp(fn, in_memory, tangents))
    loss = lambda *a: jnp.sum(fn(*a) ** 2)
    argnums = tuple(range(len(args)))
    close(wrap(jax.grad(loss, argnums))(*on_disk), jax.grad(loss, argnums)(*in_memory), 1e-4)
    # second order, as check_grads takes it
    second = jax.grad(lambda *a: jnp.sum(jax.grad(loss)(*a)))
    close(wrap(second)(*on_disk), second(*in_memory), 1e-4)
    check_grads(fn, on_disk, 2, ["fwd", "rev"], eps=1.0)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_integer_diskarrays_have_float0_tangents(small, jitted):
    rng = np.random.default_rng(8)
    x = (rng.normal(size=1001) * 8).astype(np.float32)
    n = rng.integers(-4, 5, size=1001).astype(np.int32)
    wrap = jax.jit if jitted else (lambda f: f)
    t = jnp.asarray(rng.normal(size=1001), np.float32)
    # frexp's exponent is an int32 DiskArray: its tangent is JAX's float0 zeros, in memory
    got = wrap(partial(jax.jvp, jnp.frexp))((disk(x),), (t,))
    want = jax.jvp(jnp.frexp, (jnp.asarray(x),), (t,))
    close(got[0], want[0])
    close(got[1][0], want[1][0])
    assert got[1][1].dtype == want[1][1].dtype == jax.dtypes.float0
    assert got[1][1].shape == want[1][1].shape
    # ldexp with an int32 DiskArray exponent: the gradient of x, and n's float0 one
    loss = lambda x, n: jnp.sum(jnp.ldexp(x, n) ** 2)
    grad = partial(jax.grad(loss, (0, 1), allow_int=True))
    got, want = wrap(grad)(disk(x), disk(n)), grad(jnp.asarray(x), jnp.asarray(n))
    close(got[0], want[0], 1e-4)
    assert isinstance(got[0], jask.DiskArray)
    assert got[1].dtype == want[1].dtype == jax.dtypes.float0
    assert got[1].shape == want[1].shape
    check_grads(lambda x: jnp.frexp(x)[0], (disk(x[:50]),), 1)


# -- a 0-d DiskArray init value of lax.reduce and lax.reduce_window (lax_test testReduce,
# testReduceWindow*: the computation was traced on DiskArray scalars, which XLA cannot lower)
# and a reduction by any computation, streamed along the axis it keeps


def _max_by_a_lambda(x, init):
    # a computation JAX does not recognize as a monoid: reduce_p with its jaxpr (XLA may apply
    # the init value any number of times, so it is the identity)
    return lax.reduce(x, init, lambda a, b: lax.max(a, b), (1,))


def _window_max(x, init):
    return lax.reduce_window(x, init, lax.max, (1, 3), (1, 2), "SAME")


def _window_sum(x, init):
    return lax.reduce_window(x, init, lax.add, (1, 4), (1, 1), [(0, 0), (1, 2)])


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("fn", [_max_by_a_lambda, _window_max, _window_sum])
def test_reductions_with_a_0d_diskarray_init_value(fn, jitted):
    jask.set_memory_budget("8KB")
    try:
        rng = np.random.default_rng(9)
        x = rng.normal(size=(301, 17)).astype(np.float32)
        init = np.array(-np.inf if fn in (_max_by_a_lambda, _window_max) else 0.0, np.float32)
        wrap = jax.jit if jitted else (lambda f: f)
        want = fn(jnp.asarray(x), jnp.asarray(init))
        got = wrap(fn)(disk(x), disk(init))
        assert isinstance(got, jask.DiskArray)  # streamed: x is 20 KB, the budget 8 KB
        close(got, want)
        t = jnp.asarray(rng.normal(size=x.shape), np.float32)
        close(
            wrap(partial(jax.jvp, lambda x: fn(x, disk(init))))((disk(x),), (t,)),
            jax.jvp(lambda x: fn(x, jnp.asarray(init)), (jnp.asarray(x),), (t,)),
        )
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)


# -- a scan whose body's outputs are DiskArrays (lax_control_flow_test testScanRnn: an RNN's
# per-step output from weights on disk is a small DiskArray, which JAX cannot stack into ys)


def test_scan_of_an_rnn_whose_weights_and_inputs_are_on_disk(small):
    r = np.random.default_rng(10)
    n_in, n_hid, n_out, length = 4, 3, 2, 5
    w_trans = r.normal(size=(n_hid, n_hid + n_in)).astype(np.float32)
    w_out = r.normal(size=(n_out, n_hid + n_in)).astype(np.float32)
    inputs = r.normal(size=(length, n_in)).astype(np.float32)
    targets = r.normal(size=(length, n_out)).astype(np.float32)

    def step(params, state, x):
        w_trans, w_out = params
        stacked = jnp.concatenate([state, x])
        return jnp.tanh(w_trans @ stacked), jnp.tanh(w_out @ stacked)

    def loss(params, inputs, targets):
        _, outputs = lax.scan(partial(step, params), jnp.zeros(n_hid), inputs)
        return jnp.sum((outputs - targets) ** 2)

    mem = ((jnp.asarray(w_trans), jnp.asarray(w_out)), jnp.asarray(inputs), jnp.asarray(targets))
    on_disk = ((disk(w_trans), disk(w_out)), disk(inputs), disk(targets))
    for fn in (loss, jax.jit(loss)):
        close(fn(*on_disk), loss(*mem), 1e-5)
        grads = jax.grad(fn)(*on_disk)
        assert all(isinstance(g, jask.DiskArray) for g in grads)
        close(grads, jax.grad(loss)(*mem), 1e-4)
    tangent = mem[0]
    close(
        jax.jvp(lambda p: loss(p, *on_disk[1:]), (on_disk[0],), (tangent,)),
        jax.jvp(lambda p: loss(p, *mem[1:]), (mem[0],), (tangent,)),
        1e-4,
    )


# -- reverse over reverse of a cond (lax_control_flow_test testCondGrad2): the linearized cond
# fills the residuals a branch does not produce with empty values, which for a DiskArray type
# leaked the branch's int32 tracer into the outer program


def _cond_of_branches_with_other_residuals(x):
    scale = jnp.arange(1.0, x.shape[0] + 1, dtype=x.dtype)
    return lax.cond(x[0] < 2, lambda x: scale * x, jnp.sin, x)


def _switch_of_three_branches(x):
    index = jnp.clip(x[0].astype(jnp.int32), 0, 2)
    return lax.switch(index, [jnp.sin, lambda x: x * x, lambda x: jnp.exp(x) * 0.5], x)


def _second_order_reverse(fn, x):
    y, pullback = jax.vjp(fn, x)
    inner = lambda ct: pullback(ct)[0]
    z, pullback2 = jax.vjp(inner, jnp.ones_like(y))
    return z, pullback2(jnp.ones_like(z))[0]


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("first", [1.72, 2.14, 0.5], ids=["branch0", "branch1", "low"])
@pytest.mark.parametrize(
    "fn",
    [_cond_of_branches_with_other_residuals, _switch_of_three_branches],
    ids=["cond", "switch"],
)
def test_reverse_over_reverse_of_a_cond(small, fn, first, jitted):
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 1.5, size=3001).astype(np.float32)  # 12 KB: many blocks at 16 KB
    x[0] = first
    wrap = jax.jit if jitted else (lambda f: f)
    got = wrap(partial(_second_order_reverse, fn))(disk(x))
    want = _second_order_reverse(fn, jnp.asarray(x))
    close(got, want, 1e-5)
    # the second derivative, as jax.grad of jax.grad (check_grads order 2, "rev")
    loss = lambda x: jnp.sum(wrap(fn)(x))
    hvp = jax.grad(lambda x: jnp.sum(jax.grad(loss)(x) ** 2))
    close(hvp(disk(x)), hvp(jnp.asarray(x)), 1e-5)
