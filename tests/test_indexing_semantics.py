"""jnp's indexing semantics on DiskArrays: a table of index expressions (several integer arrays,
arrays after the first axis, slices, None and Ellipsis mixed in, negative and out-of-range
indices, boolean masks) run on a DiskArray and on the same jax.Array, with the indices in memory
and on disk, eagerly and under jit, comparing values, dtypes, shapes and the exception type of
errors; gradients against jax.grad; and the jnp functions that take indices (take_along_axis,
take, bincount, histogram, argwhere, nonzero, x.at[...]) with DiskArray indices, streamed by
blocks of the indices at a small budget. Shapes are not block multiples."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
import jask._api.operands

from conftest import assert_same

SHAPE = (61, 13, 7)
RNG = np.random.default_rng(6)
X = RNG.standard_normal(SHAPE).astype(np.float32)
ROWS = np.array([3, -1, 5, 36, 5, 0, -61], np.int32)  # duplicates and negatives
COLS = np.array([1, 2, 12, 0, -13, 4, 4], np.int32)
K2 = np.array([[0, 4], [3, -5]], np.int32)
OOB = np.array([70, -80, 2, 60], np.int32)  # clamped by x[idx], as jnp does
MASK0 = X[:, 0, 0] > 0
MASK01 = X[:, :, 0] > 0.3
MASK12 = X[0] > 0
LABELS = RNG.integers(0, 11, 300).astype(np.int32)  # several blocks of indices at 4KB

# index expressions: functions of the index arrays (in memory or DiskArrays) giving a key
KEYS = {
    "two_arrays": lambda a: (a["I"], a["J"]),
    "separated_arrays_go_first": lambda a: (a["I"], slice(None), a["J"] % 5),
    "adjacent_arrays_keep_place": lambda a: (slice(2, 30, 3), a["J"], a["J"] % 5),
    "array_after_first_axis": lambda a: (slice(None), a["J"]),
    "ellipsis_then_array": lambda a: (Ellipsis, a["K2"]),
    "broadcast_arrays": lambda a: (a["I"][:, None], slice(None, None, -2), a["J"][None, :] % 5),
    "none_slice_array": lambda a: (None, slice(1, None), a["K2"] % 11, None),
    "out_of_range_clamped": lambda a: (a["OOB"], a["OOB"] % 13),
    "mask_first_axis": lambda a: a["MASK0"],
    "mask_two_axes": lambda a: a["MASK01"],
    "mask_later_axes": lambda a: (slice(None, 9), a["MASK12"]),
    "mask_and_array": lambda a: (a["MASK0"], 2, a["J"][:1] % 5),
    "scalar_true": lambda a: (Ellipsis, True),
}
# expressions that raise: jnp's exception type is expected from the DiskArray too
ERRORS = {
    "arrays_do_not_broadcast": lambda a: (a["I"], a["K2"]),
    "mask_of_wrong_shape": lambda a: a["MASK12"],
    "float_index": lambda a: a["I"].astype(jnp.float32),
    "too_many_indices": lambda a: (a["I"], 0, 0, 0),
}


def arrays(on_disk):
    values = {"I": ROWS, "J": COLS, "K2": K2, "OOB": OOB, "MASK0": MASK0, "MASK01": MASK01}
    values["MASK12"] = MASK12
    if on_disk:
        return {k: jask.DiskArray.from_numpy(v) for k, v in values.items()}
    return {k: jnp.asarray(v) for k, v in values.items()}


@pytest.fixture
def x():
    return jask.DiskArray.from_numpy(X)


@pytest.mark.parametrize("name", KEYS)
def test_index_expressions_as_jnp(name, x, small_budget, monkeypatch):
    """Indices in memory (results in memory when small), then on disk with results forced to
    disk (a tiny IN_MEMORY_LIMIT); eagerly, and under jit with the indices on disk."""
    small_budget("16KB")
    expected = jnp.asarray(X)[KEYS[name](arrays(False))]
    assert_same(x[KEYS[name](arrays(False))], expected)
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 40)
    out = x[KEYS[name](arrays(True))]
    assert_same(out, expected)
    assert isinstance(out, jask.DiskArray) == (expected.size > 40)
    jitted = jax.jit(lambda x, a: x[KEYS[name](a)])
    if "mask" in name:  # a mask under jit has no static count of True elements: JAX's error
        with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
            jitted(jnp.asarray(X), arrays(False))
        with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
            jitted(x, arrays(False))
        with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
            jitted(x, arrays(True))
        return
    assert_same(jitted(x, arrays(True)), expected)


@pytest.mark.parametrize("on_disk", [False, True], ids=["indices_in_memory", "indices_on_disk"])
@pytest.mark.parametrize("name", ERRORS)
def test_index_errors_as_jnp(name, on_disk, x):
    with pytest.raises(Exception) as want:
        jnp.asarray(X)[ERRORS[name](arrays(False))]
    with pytest.raises(want.type):
        x[ERRORS[name](arrays(on_disk))]


GRAD_KEYS = [
    ("separated_arrays_go_first", True),
    ("array_after_first_axis", True),
    ("out_of_range_clamped", False),
    ("out_of_range_clamped", True),
    ("mask_two_axes", False),
]


@pytest.mark.parametrize("name, on_disk", GRAD_KEYS, ids=[f"{n}-disk={d}" for n, d in GRAD_KEYS])
def test_index_expression_gradients(name, on_disk, x, small_budget):
    small_budget("8KB")

    def loss(x, a):
        return jnp.sum(jnp.sin(x[KEYS[name](a)]) * 1.5)

    want = jax.grad(loss)(jnp.asarray(X), arrays(False))
    got = jax.grad(loss)(x, arrays(on_disk))
    assert isinstance(got, jask.DiskArray)
    assert_same(got, want)


# -- jnp functions with DiskArray indices -------------------------------------------------

LOGP = jax.nn.log_softmax(jnp.asarray(X[:, :, 0]), axis=1)
TABLE = RNG.standard_normal((300, 11)).astype(np.float32)
NN = RNG.integers(0, 300, (23, 4)).astype(np.int32)
WILD = np.concatenate([LABELS[:40], [11, 40, -1, -12]]).astype(np.int32)  # out of range

# functions of (labels, x): labels int32[300] (an in-memory or DiskArray), x the data (in memory
# or a DiskArray): each is run with labels on disk against jnp with them in memory
FUNCTIONS = {
    "cross_entropy_take_along_axis": lambda L, t: -jnp.take_along_axis(t, L[:, None], 1)[:, 0],
    "take_axis_1": lambda L, t: jnp.take(t, L[:50], axis=1),
    "take_clip": lambda L, t: jnp.take(t, L[:50] * 3, axis=1, mode="clip"),
    "take_fill": lambda L, t: jnp.take(t, L[:50] * 3 - 5, axis=1, mode="fill", fill_value=-2.0),
    "at_get_fill": lambda L, t: t.at[L[:60] * 9].get(mode="fill", fill_value=7.0),
    "rows_of_memory_array": lambda L, t: jnp.asarray(TABLE)[L[:80] * 27 - 20],
    "bincount": lambda L, t: jnp.bincount(L, length=11),
    "bincount_weights": lambda L, t: jnp.bincount(L, t[:, 0], length=9),
    "argwhere_size": lambda L, t: jnp.argwhere(L > 6, size=150, fill_value=-1),
    "nonzero_size": lambda L, t: jnp.nonzero(L == 3, size=40)[0],
    "knn_votes": lambda L, t: jnp.sum(jax.nn.one_hot(L[jnp.asarray(NN)], 11), axis=1),
    "at_set": lambda L, t: jnp.zeros(13).at[L].set(jnp.arange(300.0)),
    "at_add_drops_out_of_range": lambda L, t: jnp.zeros(11).at[L * 2 - 5].add(1.0),
    "at_min": lambda L, t: jnp.full(11, 9.0).at[L].min(jnp.linspace(-1, 1, 300)),
    "at_max_rows": lambda L, t: t.at[L[:40] * 3].max(5.0),
    "put_along_axis": lambda L, t: jnp.put_along_axis(t, L[:61, None], -1.0, 1, inplace=False),
}
DIFFERENTIABLE = [
    "cross_entropy_take_along_axis",
    "take_axis_1",
    "take_clip",
    "at_get_fill",
    "bincount_weights",
    "at_max_rows",
    "put_along_axis",
]


def labels(on_disk):
    return jask.DiskArray.from_numpy(LABELS) if on_disk else jnp.asarray(LABELS)


# the functions whose data (the second argument) is also run in memory with labels on disk
DATA_IN_MEMORY = ["cross_entropy_take_along_axis", "take_fill", "at_max_rows"]
CASES = [(n, True) for n in FUNCTIONS] + [(n, False) for n in DATA_IN_MEMORY]


@pytest.mark.parametrize(
    "name, data_on_disk", CASES, ids=[f"{n}-data_on_disk={d}" for n, d in CASES]
)
def test_functions_of_disk_indices(name, data_on_disk, small_budget):
    small_budget("8KB")
    fn = FUNCTIONS[name]
    t_np = np.asarray(LOGP if name.startswith("cross") else X[:, :, 0])
    t_np = (
        np.concatenate([t_np] * 9)[:300] if name.startswith("cross") or "weights" in name else t_np
    )
    t = jask.DiskArray.from_numpy(t_np) if data_on_disk else jnp.asarray(t_np)
    expected = fn(jnp.asarray(LABELS), jnp.asarray(t_np))
    for f in (fn, jax.jit(fn)):
        assert_same(f(labels(True), t), expected)
    if name in DIFFERENTIABLE:  # w.r.t. the data; in memory: scatter-adds at disk indices

        def loss(L, t):
            return jnp.sum(jnp.cos(fn(L, t)))

        want = jax.grad(loss, argnums=1)(jnp.asarray(LABELS), jnp.asarray(t_np))
        got = jax.grad(loss, argnums=1)(labels(True), t)
        assert isinstance(got, jask.DiskArray) == data_on_disk
        assert_same(got, want)


def test_disk_indices_are_read_in_blocks(small_budget):
    """At 4KB, labels of 300 int32 are read in several blocks (the engine's row reads), each
    label once."""
    small_budget("4KB")
    with jask.stats() as s:
        out = jnp.bincount(labels(True), length=11)
    np.testing.assert_array_equal(np.asarray(out), np.bincount(LABELS, minlength=11))
    assert s.ops["rows"].calls >= 2 and s.ops["rows"].bytes_read == LABELS.nbytes


def test_out_of_range_gathers_and_scatters_as_jnp():
    """Gathers clamp (x[idx]) or fill (mode="fill"); scatters drop out-of-range updates."""
    wild = jask.DiskArray.from_numpy(WILD)
    t = jask.DiskArray.from_numpy(TABLE[:50])
    cases = [
        lambda L, t: t[L],
        lambda L, t: t[:, L % 50],
        lambda L, t: t.at[L].get(mode="fill", fill_value=-1.0),
        lambda L, t: t.at[L].get(mode="clip"),
        lambda L, t: t.at[L].set(3.0),
        lambda L, t: t.at[L, L].add(1.0),
        lambda L, t: t.at[L].set(2.0, mode="clip"),
    ]
    for fn in cases:
        expected = fn(jnp.asarray(WILD), jnp.asarray(TABLE[:50]))
        assert_same(fn(wild, t), expected)
    assert_same(jax.jit(cases[0])(wild, t), cases[0](jnp.asarray(WILD), jnp.asarray(TABLE[:50])))


def test_jask_take_and_masked_updates(small_budget):
    """Row takes at DiskArray indices (Jask's own take: negative ones wrap once, the rest
    clamp, as for traced indices; jask.take is jnp.take); x.at[mask] updates and jnp.where
    with a mask, in memory and on disk."""
    small_budget("16KB")
    t_np = X[:, :, 1]
    t = jask.DiskArray.from_numpy(t_np)
    idx = np.array([1, 5, -1, 60, -61, 3], np.int32)
    expected = t_np[idx]
    take = jask._api.indexing.take  # x[list] and Jask's own callers
    for fn in (take, jax.jit(take), jax.jit(lambda t, i: jask.take(t, i, axis=0))):
        assert_same(fn(t, jask.DiskArray.from_numpy(idx)), jnp.asarray(expected))
    mask = t_np > 0.5
    checks = [
        (lambda t, m: t.at[m].set(0.0), False),
        (lambda t, m: t.at[m[:, 0]].add(1.0), True),
        (lambda t, m: jnp.where(m, 0.0, t), True),
    ]
    for fn, mask_on_disk in checks:
        expected = fn(jnp.asarray(t_np), mask)
        m = jask.DiskArray.from_numpy(mask) if mask_on_disk else mask
        out = fn(t, m)
        assert isinstance(out, jask.DiskArray)
        assert_same(out, expected)
