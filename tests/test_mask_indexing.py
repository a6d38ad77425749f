"""Boolean masks on disk, as jnp has them: x[mask] and x.at[mask] with a DiskArray mask, x a
DiskArray or a jax.Array, against jnp with the same mask in memory (values, dtypes, shapes);
the jax.numpy functions that index with a mask (compress, extract, where, nonzero, argwhere);
gradients against jax.grad on jax.Arrays; JAX's NonConcreteBooleanIndexError for a traced mask
under jit. The data is about 1 MB at a 64KB budget, so every pass over it takes many blocks;
shapes are not block multiples."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.numpy import indexing as jax_indexing

import jask
import jask._api.indexing
import jask._api.operands

from conftest import assert_same

SHAPE = (1003, 37, 7)
RNG = np.random.default_rng(33)
X = RNG.standard_normal(SHAPE).astype(np.float32)
Y = RNG.standard_normal(SHAPE).astype(np.float32)
MASKS = {
    "FULL": X > 0.3,  # of x's rank
    "ROWS": X[:, 0, 0] > 0,  # the leading axis
    "ROWS_COLS": X[:, :, 0] > 0.5,  # the two leading axes
    "COLS": X[0, :, 0] > 0,  # a later axis
    "EMPTY": np.zeros(SHAPE[0], bool),
}
IDX = np.array([0, 5, -1, 3, 3], np.int32)

# index expressions: functions of the masks (DiskArrays, or jax.Arrays for the reference)
KEYS = {
    "full_rank": lambda m: m["FULL"],
    "leading_axis": lambda m: m["ROWS"],
    "two_leading_axes": lambda m: m["ROWS_COLS"],
    "later_axis": lambda m: (slice(None), m["COLS"]),
    "ellipsis_then_mask": lambda m: (Ellipsis, m["COLS"], slice(None, 4)),
    "mask_and_index_array": lambda m: (m["ROWS"], jnp.asarray(IDX[:1]), 2),
    "empty_mask": lambda m: m["EMPTY"],
}


def masks(on_disk):
    if on_disk:
        return {k: jask.DiskArray.from_numpy(v) for k, v in MASKS.items()}
    return {k: jnp.asarray(v) for k, v in MASKS.items()}


def data(kind, values=X):
    return jask.DiskArray.from_numpy(values) if kind == "disk" else jnp.asarray(values)


@pytest.fixture(autouse=True)
def many_blocks():
    jask.set_memory_budget("64KB")
    yield
    jask.set_memory_budget("64MB")


@pytest.mark.parametrize("x_kind", ["disk", "jax"])
@pytest.mark.parametrize("name", KEYS)
def test_disk_mask_indexes_as_jnp(name, x_kind):
    expected = jnp.asarray(X)[KEYS[name](masks(False))]
    out = data(x_kind)[KEYS[name](masks(True))]
    assert_same(out, expected)
    if x_kind == "jax":
        assert isinstance(out, jax.Array) and not isinstance(out, jask.DiskArray)


# x.at[mask] updates: functions of (x, masks)
UPDATES = {
    "set_scalar": lambda x, m: x.at[m["FULL"]].set(0.0),
    "set_values": lambda x, m: x.at[m["ROWS"]].set(jnp.asarray(Y[: MASKS["ROWS"].sum()])),
    "add_rows": lambda x, m: x.at[m["ROWS"]].add(1.5),
    "add_later_axis": lambda x, m: x.at[:, m["COLS"]].add(jnp.arange(7.0)),
    "mul": lambda x, m: x.at[m["ROWS_COLS"]].mul(-2.0),
    "max_drop": lambda x, m: x.at[m["ROWS"], 3].max(0.25, mode="drop"),
    "get": lambda x, m: x.at[m["FULL"]].get(),
    "get_fill": lambda x, m: x.at[m["ROWS"], 1:].get(mode="fill", fill_value=-9.0),
    "set_empty": lambda x, m: x.at[m["EMPTY"]].set(3.0),
}


@pytest.mark.parametrize("x_kind", ["disk", "jax"])
@pytest.mark.parametrize("name", UPDATES)
def test_disk_mask_updates_as_jnp(name, x_kind):
    expected = UPDATES[name](jnp.asarray(X), masks(False))
    out = UPDATES[name](data(x_kind), masks(True))
    assert_same(out, expected)


FUNCTIONS = {
    "compress": lambda x, m: jnp.compress(m["ROWS"], x, axis=0),
    "compress_axis_1": lambda x, m: jnp.compress(m["COLS"], x, axis=1),
    "extract": lambda x, m: jnp.extract(m["FULL"], x),
    "where": lambda x, m: jnp.where(m["FULL"], x, jnp.asarray(Y)),
    "where_rows": lambda x, m: jnp.where(m["ROWS"][:, None, None], x, 0.0),
}


@pytest.mark.parametrize("x_kind", ["disk", "jax"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_jnp_functions_of_disk_masks(name, x_kind):
    expected = FUNCTIONS[name](jnp.asarray(X), masks(False))
    out = FUNCTIONS[name](data(x_kind), masks(True))
    for o, e in zip(jax.tree.leaves(out), jax.tree.leaves(expected), strict=True):
        assert_same(o, e)


def test_argwhere_of_disk_mask_as_jnp():
    """jnp.argwhere (jnp.nonzero) with a static size past the True count (filled)."""
    expected = jnp.argwhere(jnp.asarray(MASKS["ROWS"]), size=700, fill_value=-1)
    assert_same(jnp.argwhere(masks(True)["ROWS"], size=700, fill_value=-1), expected)


XI = (X * 10).astype(np.int32)
# updates a select takes (a DiskArray mask of x's leading axes, values broadcasting against the
# other axes), with jnp's dtype rules: values promoted with x, the result cast back to x's dtype
SELECT_UPDATES = {
    "int_add_float": lambda x, m: x.at[m["FULL"]].add(1.7),
    "int_set_float_values": lambda x, m: x.at[m["ROWS_COLS"], ...].set(jnp.linspace(-3, 3, 7)),
    "int_subtract": lambda x, m: x.at[m["ROWS"]].subtract(jnp.arange(7, dtype=jnp.int32)),
    "int_max_uint8": lambda x, m: x.at[m["ROWS"], :].max(jnp.uint8(4)),
    "int_mul_bool": lambda x, m: x.at[m["FULL"]].mul(False),
}


@pytest.mark.parametrize("name", SELECT_UPDATES)
def test_mask_updates_as_one_select(name):
    """A DiskArray mask of a DiskArray's leading axes updates it in one streamed select (no
    gather or scatter at the mask's positions), with jnp's values and dtypes."""
    with warnings.catch_warnings(record=True) as want:  # jnp warns of unsafe casts
        warnings.simplefilter("always")
        expected = SELECT_UPDATES[name](jnp.asarray(XI), masks(False))
    with warnings.catch_warnings(record=True) as got, jask.stats() as s:
        warnings.simplefilter("always")
        out = SELECT_UPDATES[name](data("disk", XI), masks(True))
    assert [str(w.message) for w in got] == [str(w.message) for w in want]
    assert isinstance(out, jask.DiskArray)
    assert_same(out, expected)
    assert not {"take", "scatter_add_rows", "rows"} & set(s.ops), s.ops.keys()


def test_mask_update_mode_errors_as_jnp():
    with pytest.raises(Exception) as want:
        jnp.asarray(X).at[jnp.asarray(MASKS["ROWS"])].set(1.0, mode="bogus")
    with pytest.raises(want.type):
        data("disk").at[masks(True)["ROWS"]].set(1.0, mode="bogus")


TRACED = {
    "getitem": lambda x, m: x[m["FULL"]],
    "getitem_later_axis": lambda x, m: x[:, m["COLS"]],
    "at_set": lambda x, m: x.at[m["ROWS"]].set(0.0),
    "at_add": lambda x, m: x.at[m["FULL"]].add(1.0),
    "at_get": lambda x, m: x.at[m["ROWS_COLS"]].get(),
}


@pytest.mark.parametrize("name", TRACED)
def test_traced_disk_mask_is_jax_error(name):
    """Under jit a mask (an argument, so traced) has no static count of True elements: JAX's
    own error, as for a traced in-memory mask; a concrete DiskArray mask closed over works."""
    fn = TRACED[name]
    with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
        jax.jit(fn)(jnp.asarray(X), masks(False))
    for x_kind in ("disk", "jax"):
        with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
            jax.jit(fn)(data(x_kind), masks(True))


def test_concrete_disk_mask_closed_over_in_jit():
    """A concrete mask closed over in jit is a constant: jnp indexes with it there, and so
    with a DiskArray mask (read at trace time)."""
    on_disk = masks(True)

    def fn(x, m):
        return x[m["ROWS"], 1:] * 2.0, x.at[m["ROWS_COLS"]].set(0.0), x[m["FULL"]]

    expected = fn(jnp.asarray(X), masks(False))
    for x_kind in ("disk", "jax"):
        out = jax.jit(lambda x: fn(x, on_disk))(data(x_kind))
        for o, e in zip(out, expected, strict=True):
            assert_same(o, e)


def test_mask_of_wrong_shape_is_jnp_error():
    bad = {"FULL": MASKS["FULL"][:, :5]}
    with pytest.raises(IndexError) as want:
        jnp.asarray(X)[jnp.asarray(bad["FULL"])]
    for x_kind in ("disk", "jax"):
        with pytest.raises(IndexError, match="boolean index did not match") as got:
            data(x_kind)[jask.DiskArray.from_numpy(bad["FULL"])]
        assert "boolean index did not match" in str(want.value)
        assert str(got.value).split(":")[0] == str(want.value).split(":")[0]


GRADIENTS = {
    "getitem": lambda x, m: jnp.sum(jnp.sin(x[m["FULL"]]) * 1.5),
    "at_set": lambda x, m: jnp.sum(jnp.sin(x.at[m["ROWS_COLS"]].set(0.0))),
    "at_add": lambda x, m: jnp.sum(jnp.sin(x.at[:, m["COLS"]].add(2.0)) ** 2),
    "at_mul": lambda x, m: jnp.sum(jnp.sin(x.at[m["FULL"]].mul(3.0))),
}


@pytest.mark.parametrize("x_kind", ["disk", "jax"])
@pytest.mark.parametrize("name", GRADIENTS)
def test_disk_mask_gradients_as_jax_grad(name, x_kind):
    """jax.grad with respect to x (masks are not differentiable inputs) against jax.grad of
    the same function with everything in memory."""
    jask.set_memory_budget("128KB")  # gradients hold cotangents beside the blocks
    want = jax.grad(GRADIENTS[name])(jnp.asarray(X), masks(False))
    got = jax.grad(GRADIENTS[name])(data(x_kind), masks(True))
    assert isinstance(got, jask.DiskArray) == (x_kind == "disk")
    assert_same(got, want)


def test_disk_mask_is_read_in_blocks():
    """The mask (1 MB of bools at 64KB) is never read whole: every engine op on it runs in
    several blocks, and the blocks alive at once stay within the budget."""
    mask = jask.DiskArray.from_numpy(MASKS["FULL"])
    x = data("disk")
    with jask.stats() as s:
        out = x[mask]
    assert_same(out, jnp.asarray(X)[jnp.asarray(MASKS["FULL"])])
    assert s.total.blocks > 2 * len(s.ops)
    assert s.blocks_peak <= 64 * 1024


def test_many_true_elements_take_disk_positions(monkeypatch):
    """A mask with more True elements than IN_MEMORY_LIMIT (lowered here) gives DiskArray
    positions, written part by part as they are found; JAX's indexing then gathers and
    scatters at DiskArray indices."""
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 2000)
    x_np, mask_np = X[:60], MASKS["FULL"][:60]  # 5,948 True elements
    mask = jask.DiskArray.from_numpy(mask_np)
    positions = jask._api.indexing.mask_positions(x_np.shape, (mask,))
    assert all(isinstance(p, jask.DiskArray) for p in positions)
    for p, e in zip(positions, np.nonzero(mask_np), strict=True):
        np.testing.assert_array_equal(np.asarray(p), e)
    expected = jnp.asarray(x_np)[jnp.asarray(mask_np)]
    for x_kind in ("disk", "jax"):
        assert_same(data(x_kind, x_np)[mask], expected)
    expected = jnp.asarray(x_np).at[jnp.asarray(mask_np)].add(1.0)
    assert_same(jnp.asarray(x_np).at[mask].add(1.0), expected)


def test_patch_leaves_in_memory_indices_alone():
    """JAX's own indexer for keys without a DiskArray: the same NDIndexer as unpatched."""
    patched = jax_indexing.NDIndexer.from_raw_indices
    original = patched._jask_original
    for key in [
        (jnp.asarray(MASKS["ROWS"]), slice(1, None)),
        np.asarray(MASKS["FULL"]),
        (Ellipsis, jnp.asarray(IDX), None),
        3,
    ]:
        assert patched(key, SHAPE) == original(key, SHAPE)
