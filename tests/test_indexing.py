"""x[key] on DiskArrays (NumPy basic indexing on any axes), concatenate and stack: values
against NumPy, result kinds (dense, view, copy), gradients, jit and errors. The generic
transformation tests run the Cases in cases_shapes.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
import jask._api.operands
from jask import _engine

from conftest import assert_close

SHAPE = (13, 17, 11)

KEYS = [
    3,
    -1,
    slice(2, 9),
    slice(None, None, 2),
    slice(None, None, -1),
    (slice(None), 5),
    (Ellipsis, slice(2, 9, 3)),
    (5, slice(None), slice(1, 4)),
    (None, Ellipsis, 4),
    (slice(10, 2, -3), None, -2),
    (),
    Ellipsis,
    (slice(3, 3),),
    (0, 0, 0),
    (-13, -17, -11),
    (slice(None), None, slice(None, None, -4), 1),
    (slice(1, None), 16),
    (np.int64(2), np.int32(3)),
    (slice(-100, 100), slice(5, 1000, 5)),
    (4, Ellipsis, None),
    (jnp.asarray(2), slice(0, 1)),
]


@pytest.fixture
def cube(rng):
    data = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    return data, jask.DiskArray.from_numpy(data)


@pytest.fixture
def disk_results(monkeypatch):
    """Every result with more than 10 elements stays on disk."""
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)


def tasks_run() -> int:
    return _engine.pipeline_tasks_run()


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_values_match_numpy(cube, key):
    data, x = cube
    expected = data[key]
    for fn in (lambda x: x[key], jax.jit(lambda x: x[key])):
        out = fn(x)
        assert isinstance(out, jax.Array)  # small: in memory
        np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_large_results_stay_on_disk_with_numpy_values(cube, key, disk_results):
    data, x = cube
    expected = data[key]
    for fn in (lambda x: x[key], jax.jit(lambda x: x[key])):
        out = fn(x)
        assert isinstance(out, jask.DiskArray if expected.size > 10 else jax.Array)
        np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize(
    "key", [slice(2, 9), 4, (4, slice(3, 9)), (4, 3, slice(None)), -1], ids=repr
)
def test_contiguous_selections_are_views_of_the_file(cube, key, disk_results):
    data, x = cube
    before = tasks_run()
    view = x[key]
    assert tasks_run() == before, "a view streams nothing"
    assert view.path == x.path
    first = np.arange(data.size).reshape(SHAPE)[key].flat[0]
    assert _engine.info(view.handle)[3] == _engine.info(x.handle)[3] + 4 * first
    np.testing.assert_array_equal(np.asarray(view), data[key])
    assert_close(
        np.asarray(jask.sum(view, axis=-1)), data[key].sum(-1)
    )  # the view streams as an operand


@pytest.mark.parametrize(
    "key",
    [(slice(None), 5), slice(None, None, 2), (Ellipsis, slice(2, 9, 3)), slice(None, None, -1)],
    ids=repr,
)
def test_other_selections_are_streamed_copies(cube, key, disk_results):
    data, x = cube
    before = tasks_run()
    out = x[key]
    assert tasks_run() > before
    assert out.path != x.path
    np.testing.assert_array_equal(np.asarray(out), data[key])


def test_a_view_at_an_unaligned_offset_reads_the_same_with_and_without_direct_io(
    rng, disk_results, small_budget
):
    small_budget("64KB")
    data = rng.uniform(-1, 1, (20001, 5)).astype(np.float32)
    x = jask.DiskArray.from_numpy(data)
    view = x[1:]  # 20 bytes into the data: not 4096-aligned
    assert _engine.info(view.handle)[3] == _engine.info(x.handle)[3] + 20
    results = []
    for direct in (True, False):
        _engine.set_direct_io(direct)
        try:
            before = _engine.io_counters()[0]
            results.append(
                (np.asarray(view * 2.0), float(jask.sum(view)), _engine.io_counters()[0] - before)
            )
        finally:
            _engine.set_direct_io(True)
    (doubled, total, direct_bytes), (doubled_buffered, total_buffered, _) = results
    np.testing.assert_array_equal(doubled, data[1:] * 2.0)
    np.testing.assert_array_equal(doubled, doubled_buffered)
    assert total == total_buffered
    assert_close(total, data[1:].sum())
    assert direct_bytes > data.nbytes  # reads of the view bypassed the page cache


def test_the_whole_array_is_the_array_itself(cube, disk_results):
    _, x = cube
    assert x[...] is x and x[:] is x and x[:, :, :] is x


@pytest.mark.parametrize(
    "key",
    [
        (slice(3, 9), slice(None, None, 2)),
        (slice(None), 5),
        (None, Ellipsis, 4),
        (slice(None, None, -2), slice(15, 2, -3), 1),
        6,
        slice(2, 9),
    ],
    ids=repr,
)
@pytest.mark.parametrize("on_disk", [False, True], ids=["dense", "on_disk"])
def test_gradients_place_the_cotangent_into_zeros(cube, key, on_disk, monkeypatch):
    if on_disk:
        monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    data, x = cube
    weight = np.random.default_rng(1).uniform(-1, 1, data[key].shape).astype(np.float32)

    def loss(x):
        y = jnp.tanh(x[key])
        if isinstance(y, jask.DiskArray):
            return jask.vdot(y, jask.DiskArray.from_numpy(weight))
        return jnp.sum(y * weight)

    expected = jax.grad(lambda x: jnp.sum(jnp.tanh(x[key]) * weight))(data)
    for grad in (
        jax.grad(loss),
        jax.jit(jax.grad(loss)),
        jax.grad(jax.jit(loss)),
        jax.grad(jax.checkpoint(loss)),
    ):
        g = grad(x)
        assert isinstance(g, jask.DiskArray)
        assert_close(np.asarray(g), expected)
    tangent = np.random.default_rng(2).uniform(-1, 1, SHAPE).astype(np.float32)
    _, jvp_out = jax.jvp(loss, (x,), (jask.DiskArray.from_numpy(tangent),))
    _, expected_jvp = jax.jvp(lambda x: jnp.sum(jnp.tanh(x[key]) * weight), (data,), (tangent,))
    assert_close(jvp_out, expected_jvp)
    assert_close(jax.linearize(loss, x)[1](jask.DiskArray.from_numpy(tangent)), expected_jvp)


def test_traced_leading_index_still_selects_rows(cube):
    data, x = cube
    pick = jax.jit(lambda x, i: x[i])
    for i in (3, 0, 12, -1, -13):
        np.testing.assert_array_equal(np.asarray(pick(x, i)), data[i])
    np.testing.assert_array_equal(
        np.asarray(jax.jit(lambda x, i: x[i, 1:4, ::-2])(x, 5)), data[5, 1:4, ::-2]
    )
    grad = jax.jit(jax.grad(lambda x, i: jnp.sum(x[i] ** 2)))(x, 4)
    expected = np.zeros_like(data)
    expected[4] = 2 * data[4]
    assert_close(np.asarray(grad), expected)
    batch = jax.jit(lambda x, s: jax.lax.dynamic_slice_in_dim(x, s, 3))(x, 7)
    np.testing.assert_array_equal(np.asarray(batch), data[7:10])
    np.testing.assert_array_equal(
        np.asarray(jax.jit(lambda x, s: jask.rows(x, s, 2))(x, 11)), data[11:13]
    )


def test_static_keys_compile_once(cube):
    data, x = cube
    traces = []

    @jax.jit
    def f(x):
        traces.append(1)
        return x[2:11:3, ..., 5]

    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x)), data[2:11:3, ..., 5])
    assert len(traces) == 1


def test_integer_array_keys_gather_rows_then_index(cube):
    data, x = cube
    idx = np.array([4, 0, -1, 4])
    np.testing.assert_array_equal(np.asarray(x[idx]), data[idx])
    np.testing.assert_array_equal(np.asarray(x[[1, 2], 0]), data[[1, 2], 0])
    np.testing.assert_array_equal(np.asarray(x[idx, 1:3]), data[idx, 1:3])
    np.testing.assert_array_equal(
        np.asarray(x[idx.reshape(2, 2), ..., ::-5]), data[idx.reshape(2, 2), ..., ::-5]
    )
    traced = jax.jit(lambda x, i: x[i, 2])(x, jnp.asarray([3, 5]))
    np.testing.assert_array_equal(np.asarray(traced), data[[3, 5], 2])


@pytest.mark.parametrize(
    "key, error, message",
    [
        (13, IndexError, "index 13 is out of bounds for axis 0 with size 13"),
        ((slice(None), -18), IndexError, "index -18 is out of bounds for axis 1 with size 17"),
        ((0, 0, 11), IndexError, "index 11 is out of bounds for axis 2 with size 11"),
        ((0, 0, 0, 0), IndexError, "too many indices"),
        ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
        (1.5, TypeError, "float"),
        (slice(0.5, 3), TypeError, "slice bounds must be integers"),
        (slice(None, None, 0), ValueError, "slice step cannot be zero"),
        ([True, False], TypeError, "non-tuple sequence"),
        ("a", TypeError, "str"),
    ],
    ids=repr,
)
def test_bad_keys_raise_standard_errors(cube, key, error, message):
    _, x = cube
    with pytest.raises(error, match=message):
        x[key]


def test_keys_jnp_takes_give_its_values(cube):
    """Masks, arrays on a later axis and out-of-range arrays (clamped) index as jnp does."""
    data, x = cube
    ref = jnp.asarray(data)
    for key in (
        np.ones(13, bool),
        True,
        (slice(None), np.array([1, 2])),
        np.array([13]),
    ):
        np.testing.assert_array_equal(np.asarray(x[key]), np.asarray(ref[key]))
    traced = jax.jit(lambda x, i: x[:, i])(x, 2)
    np.testing.assert_array_equal(np.asarray(traced), data[:, 2])


def test_traced_slice_bounds_are_refused(cube):
    _, x = cube
    with pytest.raises(TypeError, match="traced bounds"):
        jax.jit(lambda x, i: x[i : i + 2])(x, 2)


# -- concatenate and stack ----------------------------------------------------


@pytest.fixture
def pair(rng):
    a = rng.uniform(-1, 1, (5, 7)).astype(np.float32)
    b = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    return a, b


def test_concatenate_and_stack_match_numpy(pair):
    a, b = pair
    da, db = jask.DiskArray.from_numpy(a), jask.DiskArray.from_numpy(b)
    checks = [
        (lambda: jask.concatenate([da, b, db], axis=-1), np.concatenate([a, b, b], axis=-1)),
        (lambda: jask.concatenate([da.T, db.T]), np.concatenate([a.T, b.T])),
        (lambda: jnp.concatenate((da, db), axis=None), np.concatenate([a, b], axis=None)),
        (lambda: jask.concatenate([da]), a),
        (lambda: jask.stack([da, a, da], axis=1), np.stack([a, a, a], axis=1)),
        (lambda: jnp.stack([db, db], axis=-1), np.stack([b, b], axis=-1)),
        (
            lambda: jnp.hstack([jask.reshape(da, (35,)), np.ones(2, np.float32)]),
            np.hstack([a.reshape(35), np.ones(2, np.float32)]),
        ),
        (
            lambda: jnp.vstack([jask.reshape(db, (15,)), np.zeros(15, np.float32)]),
            np.vstack([b.reshape(15), np.zeros(15, np.float32)]),
        ),
        (
            lambda: jax.jit(lambda x, y: jnp.concatenate([x, y, x], axis=1))(da, b),
            np.concatenate([a, b, a], 1),
        ),
    ]
    for run, expected in checks:
        out = run()
        assert isinstance(out, jask.DiskArray)
        np.testing.assert_array_equal(np.asarray(out), expected)


def test_concatenate_gradients_are_slices_of_the_cotangent(pair):
    a, b = pair
    da = jask.DiskArray.from_numpy(a)
    weight = np.random.default_rng(3).uniform(-1, 1, (5, 10)).astype(np.float32)
    w = jask.DiskArray.from_numpy(weight)

    def loss(x, y):
        return jask.vdot(jnp.concatenate([x, y], axis=1), w)

    expected = jax.grad(
        lambda x, y: jnp.sum(jnp.concatenate([x, y], axis=1) * weight), argnums=(0, 1)
    )(a, b)
    for grad in (jax.grad(loss, argnums=(0, 1)), jax.jit(jax.grad(loss, argnums=(0, 1)))):
        gx, gy = grad(da, jnp.asarray(b))
        assert (
            isinstance(gx, jask.DiskArray)
            and isinstance(gy, jax.Array)
            and not isinstance(gy, jask.DiskArray)
        )
        assert_close(np.asarray(gx), expected[0])
        assert_close(np.asarray(gy), expected[1])


def test_concatenate_promotes_and_errors_as_jnp(pair):
    """jask.concatenate and jask.stack are jnp's: dtypes promote, bad shapes and axes raise."""
    a, b = pair
    da = jask.DiskArray.from_numpy(a)
    for other in (b.astype(np.float16), np.zeros((5, 3), np.int32)):
        for joined in (jask.DiskArray.from_numpy(other), other):
            out = jask.concatenate([da, joined], axis=1)
            expected = jnp.concatenate([a, other], axis=1)
            assert out.dtype == expected.dtype
            np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))
    for bad in (
        lambda x: jask.concatenate([x, b], axis=0),
        lambda x: jask.concatenate([x, b], axis=2),
        lambda x: jask.stack([x, b]),
    ):
        with pytest.raises((ValueError, TypeError)):
            bad(a)
        with pytest.raises((ValueError, TypeError)):
            bad(da)
