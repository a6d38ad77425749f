"""jask.row_sparse: an elementwise optax transformation run on the rows of a table on disk that a
batch touched, in place. Values and dtypes against a NumPy/optax reference on the rows, eager and
jitted, the errors, crash safety through the journal, and the memory budget."""

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
from test_update_crash import run_until_crash_point

import jask

N, D = 5003, 7  # rows not a multiple of any block; 140 KB of float32 against a 64 KB budget
B = 64

TRANSFORMS = {
    "adam": lambda: optax.adam(0.05),
    "sgd": lambda: optax.sgd(0.5),
    "sgd_momentum": lambda: optax.sgd(0.5, momentum=0.9),
    "rmsprop": lambda: optax.rmsprop(0.05),
    "adagrad": lambda: optax.adagrad(0.1),
}


def batch(rng, n=N, b=B, dtype=np.float32):
    """Indices with duplicates (and one negative) and their gradient rows."""
    idx = rng.integers(0, n, b)
    idx[:6] = idx[6]  # a row seven times
    idx[7] = idx[8] - n  # the same row as idx[8], counted from the end
    idx[9] = -3  # the third row from the end
    grads = rng.standard_normal((b, D)).astype(dtype)
    return idx, grads


class Reference:
    """The table and the inner transformation's full state in memory: each step gathers the
    distinct rows, runs the inner update on them and scatters the results back (NumPy)."""

    def __init__(self, inner, table):
        self.inner = inner
        self.table = np.array(table)
        self.state = jax.tree_util.tree_map(np.asarray, inner.init(jnp.asarray(self.table)))

        @jax.jit  # eager optax rounds differently from compiled code: both compile
        def update(grads, state, params):
            updates, state = inner.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        self.update = update

    def step(self, idx, grads):
        n = self.table.shape[0]
        idx = np.where(idx < 0, idx + n, idx)
        rows = np.unique(idx)
        summed = np.zeros((len(rows), *grads.shape[1:]), np.float32)
        np.add.at(summed, np.searchsorted(rows, idx), grads.astype(np.float32))
        summed = jnp.asarray(summed.astype(grads.dtype))

        def gather(leaf):
            return jnp.asarray(leaf[rows]) if np.shape(leaf) == self.table.shape else leaf

        params = jnp.asarray(self.table[rows])
        new_rows, new_state = self.update(
            summed, jax.tree_util.tree_map(gather, self.state), params
        )
        self.table[rows] = np.asarray(new_rows)

        def scatter(old, new):
            if np.shape(old) != self.table.shape:
                return np.asarray(new)
            old = np.array(old)
            old[rows] = np.asarray(new)
            return old

        self.state = jax.tree_util.tree_map(scatter, self.state, new_state)


def assert_same(actual, expected):
    actual = np.asarray(actual)
    assert actual.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(actual, expected)


def assert_state_same(state, reference):
    leaves, reference_leaves = (
        jax.tree_util.tree_leaves(state),
        jax.tree_util.tree_leaves(reference),
    )
    assert len(leaves) == len(reference_leaves)
    for leaf, ref in zip(leaves, reference_leaves):
        if np.shape(ref) == (N, D):
            assert isinstance(leaf, jask.DiskArray)
        assert_same(leaf, ref)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_steps_match_the_reference_on_the_rows(name, dtype, index_dtype, rng, small_budget):
    small_budget("64KB")
    start = rng.standard_normal((N, D)).astype(dtype)
    table = jask.DiskArray.from_numpy(start)
    opt = jask.row_sparse(TRANSFORMS[name]())
    reference = Reference(TRANSFORMS[name](), start)
    state = opt.init(table)
    assert_state_same(state, reference.state)
    for _ in range(3):
        idx, grads = batch(rng, dtype=dtype)
        out, state = opt.update_(table, state, idx.astype(index_dtype), grads)
        reference.step(idx, grads)
        assert out is table
        assert_same(table, reference.table)
        assert_state_same(state, reference.state)
    untouched = np.ones(N, bool)
    untouched[np.unique(np.where(idx < 0, idx + N, idx))] = False
    np.testing.assert_array_equal(np.asarray(table)[untouched], reference.table[untouched])


def jitted_step(opt, traces):
    def loss(rows, targets):
        return jnp.sum(jnp.square(rows - targets))

    @jax.jit
    def step(table, state, idx, targets):
        traces.append(1)
        rows = table[idx]
        value, row_grads = jax.value_and_grad(loss)(rows, targets)
        table, state = opt.update_(table, state, idx, row_grads)
        return table, state, value

    return step


def test_a_jitted_step_compiles_once_and_matches_the_eager_steps(rng, small_budget):
    small_budget("64KB")
    start = rng.standard_normal((N, D)).astype(np.float32)
    eager_table, jit_table = jask.DiskArray.from_numpy(start), jask.DiskArray.from_numpy(start)
    opt = jask.row_sparse(optax.adam(0.05))
    eager_state, jit_state = opt.init(eager_table), opt.init(jit_table)
    traces = []
    step = jitted_step(opt, traces)
    handle = jit_table.handle
    for _ in range(5):
        idx, _ = batch(rng)
        idx = idx.astype(np.int32)
        targets = rng.standard_normal((B, D)).astype(np.float32)
        rows = eager_table[idx]
        row_grads = jax.grad(lambda r, t=targets: jnp.sum(jnp.square(r - t)))(rows)
        eager_table, eager_state = opt.update_(eager_table, eager_state, idx, row_grads)
        jit_table, jit_state, _ = step(jit_table, jit_state, idx, targets)
        assert isinstance(jit_table, jask.DiskArray)
        assert_same(jit_table, np.asarray(eager_table))
        for a, b in zip(
            jax.tree_util.tree_leaves(jit_state), jax.tree_util.tree_leaves(eager_state)
        ):
            assert_same(a, np.asarray(b))
    assert len(traces) == 1
    assert jask.DiskArray is type(jit_table) and handle != 0


def test_lazy_differs_from_dense_adam_only_on_untouched_rows_and_sgd_equals_dense(rng):
    n = 40
    start = rng.standard_normal((n, D)).astype(np.float32)
    idx1, idx2 = np.array([1, 2, 3]), np.array([3, 4])
    g1, g2 = rng.standard_normal((3, D)).astype(np.float32), rng.standard_normal((2, D))
    g2 = g2.astype(np.float32)
    for make, equal in [(lambda: optax.sgd(0.5), True), (lambda: optax.adam(0.1), False)]:
        table = jask.DiskArray.from_numpy(start)
        opt = jask.row_sparse(make())
        state = opt.init(table)
        table, state = opt.update_(table, state, idx1, g1)
        table, state = opt.update_(table, state, idx2, g2)
        dense, inner = jnp.asarray(start), make()
        dense_state = inner.init(dense)

        @jax.jit
        def dense_step(dense, dense_state, grad, inner=inner):
            updates, dense_state = inner.update(grad, dense_state, dense)
            return optax.apply_updates(dense, updates), dense_state

        for idx, g in [(idx1, g1), (idx2, g2)]:
            grad = np.zeros((n, D), np.float32)
            grad[idx] = g
            dense, dense_state = dense_step(dense, dense_state, grad)
        lazy = np.asarray(table)
        np.testing.assert_allclose(lazy[[3, 4]], np.asarray(dense)[[3, 4]], rtol=1e-6, atol=1e-7)
        untouched = [0, 5, 39]
        np.testing.assert_array_equal(lazy[untouched], start[untouched])  # lazy: never moved
        rows_1_2 = np.allclose(lazy[[1, 2]], np.asarray(dense)[[1, 2]], rtol=1e-6, atol=1e-7)
        assert rows_1_2 == equal  # dense adam moves rows 1, 2 again at step 2 (decayed m)


@pytest.mark.parametrize(
    "inner, needle",
    [
        (
            optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1)),
            "mixes elements of different rows",
        ),
        (
            optax.adafactor(0.1, min_dim_size_to_factor=2),
            r"has shape \[2\] for parameters of shape \[2, 7\]",
        ),
    ],
    ids=["clip_by_global_norm", "adafactor"],
)
def test_a_transformation_that_is_not_elementwise_is_refused(inner, needle):
    table = jask.DiskArray.from_numpy(np.zeros((10, D), np.float32))
    with pytest.raises(TypeError, match=needle):
        jask.row_sparse(inner).init(table)


def test_bad_arguments_are_refused_naming_shapes_and_dtypes(rng):
    table = jask.DiskArray.from_numpy(np.zeros((10, D), np.float32))
    opt = jask.row_sparse(optax.adam(0.1))
    state = opt.init(table)
    idx, g = np.array([1, 2]), np.ones((2, D), np.float32)
    with pytest.raises(TypeError, match="optax GradientTransformation"):
        jask.row_sparse(object())
    with pytest.raises(TypeError, match="expects the table as a DiskArray"):
        opt.update_(np.zeros((10, D), np.float32), state, idx, g)
    with pytest.raises(
        ValueError, match=r"row_grads float32\[2,6\] array must have shape \[B, 7\]"
    ):
        opt.update_(table, state, idx, np.ones((2, D - 1), np.float32))
    with pytest.raises(TypeError, match=r"row_grads bfloat16\[2,7\] .*float32\[10,7\] DiskArray"):
        opt.update_(table, state, idx, g.astype(ml_dtypes.bfloat16))
    with pytest.raises(
        ValueError, match=r"idx of shape \[3\] does not match row_grads float32\[2,7\]"
    ):
        opt.update_(table, state, np.array([1, 2, 3]), g)
    with pytest.raises(TypeError, match=r"idx must be an int32 or int64 vector, got float32\[2\]"):
        opt.update_(table, state, np.array([1.0, 2.0], np.float32), g)
    with pytest.raises(IndexError, match="index 10 is out of bounds for a table of 10 rows"):
        opt.update_(table, state, np.array([1, 10]), g)
    other = opt.init(jask.DiskArray.from_numpy(np.zeros((11, D), np.float32)))
    with pytest.raises(
        ValueError, match=r"state.*float32\[11,7\] DiskArray; init made a float32\[10, 7\]"
    ):
        opt.update_(table, other, idx, g)
    with pytest.raises(ValueError, match="structure"):
        opt.update_(table, jask.row_sparse(optax.sgd(0.1)).init(table), idx, g)
    np.testing.assert_array_equal(np.asarray(table), np.zeros((10, D), np.float32))  # untouched


def test_a_lasting_table_is_written_in_place_and_leaves_no_journal(tmp_path, rng):
    path = tmp_path / "table.npy"
    start = rng.standard_normal((N, D)).astype(np.float32)
    np.save(path, start)
    inode = path.stat().st_ino
    table = jask.DiskArray.open(path, mode="r+")
    opt = jask.row_sparse(optax.adam(0.05))
    reference = Reference(optax.adam(0.05), start)
    state = opt.init(table)
    for _ in range(2):
        idx, grads = batch(rng)
        table, state = opt.update_(table, state, idx, grads)
        reference.step(idx, grads)
    assert path.stat().st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == ["table.npy"]
    assert_same(np.load(path), reference.table)
    read_only = jask.DiskArray.open(path)
    with pytest.raises(PermissionError, match="read-only"):
        opt.update_(read_only, opt.init(read_only), idx, grads)


def test_rows_within_the_budget_and_a_batch_too_large_for_it(rng, small_budget):
    small_budget("64KB")
    table = jask.DiskArray.from_numpy(rng.standard_normal((N, D)).astype(np.float32))
    opt = jask.row_sparse(optax.adam(0.05))
    state = opt.init(table)
    jask.reset_memory_peak()
    for _ in range(2):
        idx, grads = batch(rng)
        table, state = opt.update_(table, state, idx, grads)
    assert jask.memory_stats()["blocks_peak"] <= 64 * 1024 + 64 * 1024
    with pytest.raises(ValueError, match=r"a batch of 1000 rows .* more than the memory budget"):
        opt.update_(table, state, np.arange(1000), np.ones((1000, D), np.float32))


# Writes rows IDX of the table at argv[1] (sgd, lr 1, gradients of one: each row's value drops by
# its count in IDX); JASK_TEST_CRASH_AT kills it at a step of the journal.
IDX = [3, 4, 5, 100, 4, 998, 999, 0]
OLD = np.arange(1000 * 16, dtype=np.float32).reshape(1000, 16)
CHILD = f"""
import sys
import threading
import numpy as np, optax
import jask
jask.set_memory_budget("1MB", scratch_dir=sys.argv[2])
table = jask.DiskArray.open(sys.argv[1], mode="r+")
opt = jask.row_sparse(optax.sgd(1.0))
idx = np.array({IDX})
opt.update_(table, opt.init(table), idx, np.ones((len(idx), 16), np.float32))
print("updated", flush=True)
"""
# Each step, and whether a kill there leaves the new rows (read through the journal by a
# read-only open, written in by the next writable open).
CRASH_POINTS = {
    "in_place_journal_written": False,  # the journal's header written, not flushed
    "in_place_journal_flushed": True,  # the commit point passed, nothing in place
    "rows_half_written": True,  # the first run of rows written in place
    "in_place_written": True,  # all written and flushed, the journal not yet removed
}


def kill_child_at(folder, point):
    """A table in `folder`, and a child killed at `point` of a row-sparse step on it."""
    folder.mkdir()
    path = folder / "table.npy"
    np.save(path, OLD)
    run_until_crash_point(CHILD, point, path, folder / "scratch")
    return path


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Tables left by children killed at each step, made at once (a child's start is mostly
    importing JAX)."""
    root = tmp_path_factory.mktemp("row_sparse_crash")
    with ThreadPoolExecutor(2) as pool:  # two cores
        paths = pool.map(kill_child_at, [root / p for p in CRASH_POINTS], CRASH_POINTS)
    return dict(zip(CRASH_POINTS, paths))


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_kill_at_each_step_leaves_all_old_or_all_new_rows(killed, point):
    path = killed[point]
    new = OLD.copy()
    np.subtract.at(new, IDX, 1.0)
    is_new = CRASH_POINTS[point]
    expected = new if is_new else OLD
    on_disk = np.load(path)
    if point == "rows_half_written":  # torn on disk until a writable open replays the journal
        assert (on_disk != OLD).any() and (on_disk != new).any()
    left = {p.name: p.read_bytes() for p in path.parent.iterdir() if p.is_file()}
    with warnings.catch_warnings():  # a journal left is read, not replayed, and said to be
        warnings.filterwarnings("ignore", "(?s).*mode=.r\\+. to finish", RuntimeWarning)
        assert_same(jask.DiskArray.open(path), expected)
    assert {p.name: p.read_bytes() for p in path.parent.iterdir() if p.is_file()} == left
    table = jask.DiskArray.open(path, mode="r+")  # replays or discards what the child left
    assert sorted(p.name for p in path.parent.iterdir() if "jask" in p.name) == []
    assert_same(table, expected)
    np.testing.assert_array_equal(np.load(path), expected)


def test_readers_in_other_threads_never_see_half_a_step(rng):
    start = rng.integers(0, 50, (N, D)).astype(np.float32)  # whole numbers: exact sums
    table = jask.DiskArray.from_numpy(start)
    opt = jask.row_sparse(optax.sgd(1.0))
    state = opt.init(table)
    steps, finished, sums = 12, threading.Event(), []

    def read():
        last = False
        while not last:  # at least one read, however the threads are scheduled
            last = finished.is_set()
            sums.append(np.asarray(table).astype(np.float64).sum())  # one engine call

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(steps):  # each step takes exactly B * D from the table's sum
            idx, _ = batch(rng)
            table, state = opt.update_(table, state, idx, np.ones((B, D), np.float32))
    finally:
        finished.set()
        reader.join()
    done = (start.astype(np.float64).sum() - np.array(sums)) / (B * D)
    np.testing.assert_array_equal(done, np.round(done))  # whole steps only
    assert done.min() >= 0 and done.max() <= steps
    assert np.asarray(table).sum() == start.sum() - steps * B * D
