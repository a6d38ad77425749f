"""update_ of a scratch array by a scratch result takes the result's file instead of copying it
(issue 34: a training step's update_tree_ of params and optimizer state copied every byte of
them). The target keeps its handle (a jitted step's argument: it compiles once); the two
handles then read one file and stand for two values: a later update_ of either, or rows
written in place into either (jask.row_sparse), leaves the other as it was. Values against
NumPy and optax on jax.Arrays; bytes moved from the engine's own counts (jask.stats)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jask

N, D = 3001, 7  # 84 KB of float32: many blocks at 16 KB


@pytest.fixture(autouse=True)
def budget_16kb(small_budget):
    small_budget("16KB")


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def moved(s):
    o = s.ops.get("update_") or s.ops.get("update_tree_")
    return (o.bytes_read, o.bytes_written) if o else (0, 0)


def test_the_target_takes_the_results_file_and_both_keep_their_values(rng):
    a = rng.normal(size=(N, D)).astype(np.float32)
    p = disk(a)
    handle = p.handle
    new = p * 2.0
    with jask.stats() as s:
        assert p.update_(new) is p
    assert moved(s) == (0, 0) and p.handle == handle
    np.testing.assert_array_equal(np.asarray(p), a * 2)
    # p updated again: new keeps its values; new updated: p keeps its values
    p.update_(p + 1.0)
    np.testing.assert_array_equal(np.asarray(p), a * 2 + 1)
    np.testing.assert_array_equal(np.asarray(new), a * 2)
    new.update_(disk(a))
    np.testing.assert_array_equal(np.asarray(new), a)
    np.testing.assert_array_equal(np.asarray(p), a * 2 + 1)
    # a file (not scratch) to a shared scratch array: copied, the other handle untouched
    q = p * 1.0
    p.update_(q)  # p and q share a file now
    p.update_(jnp.zeros_like(p))
    np.testing.assert_array_equal(np.asarray(q), a * 2 + 1)


def test_a_view_of_the_target_sees_the_update(rng):
    a = rng.normal(size=(N, D)).astype(np.float32)
    p = disk(a)
    view = jnp.reshape(p, (D, N))  # the same file: update_ copies, and the view sees it
    assert isinstance(view, jask.DiskArray) and view.path == p.path
    with jask.stats() as s:
        p.update_(p * 3.0)
    assert moved(s)[1] >= a.nbytes
    np.testing.assert_array_equal(np.asarray(view), (a * 3).reshape(D, N))
    # a view of the new value: the target copies it too
    new = p + 1.0
    new_view = jnp.reshape(new, (D, N))
    p.update_(new)
    np.testing.assert_array_equal(np.asarray(p), a * 3 + 1)
    np.testing.assert_array_equal(np.asarray(new_view), (a * 3 + 1).reshape(D, N))


def test_rows_written_in_place_leave_the_other_handle_alone(rng):
    start = rng.normal(size=(N, D)).astype(np.float32)
    table = disk(start)
    new = table * 1.0
    table.update_(new)  # table and new read one file
    opt = jask.row_sparse(optax.sgd(0.5))
    state = opt.init(table)
    idx = np.array([3, 17, 2999])
    grads = np.ones((3, D), np.float32)
    table, state = opt.update_(table, state, idx, grads)
    expected = start.copy()
    expected[idx] -= 0.5
    np.testing.assert_array_equal(np.asarray(table), expected)
    np.testing.assert_array_equal(np.asarray(new), start)


def test_update_tree_of_files_and_scratch_arrays(rng, tmp_path):
    a = rng.normal(size=(N, D)).astype(np.float32)
    np.save(tmp_path / "w.npy", a)
    tree = {"w": jask.DiskArray.open(str(tmp_path / "w.npy"), mode="r+"), "m": disk(a)}
    new = jax.tree.map(lambda x: x * 2.0 - 1.0, tree)
    with jask.stats() as s:
        jask.update_tree_(tree, new)
    read, written = moved(s)
    assert written >= a.nbytes and read < 2 * a.nbytes  # the file's leaf only
    for name in tree:
        np.testing.assert_array_equal(np.asarray(tree[name]), a * 2 - 1)
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), a * 2 - 1)
    jask.update_tree_(new, tree)  # the leaves of new share files with tree's now
    jask.update_tree_(tree, jax.tree.map(jnp.zeros_like, tree))
    for name in tree:
        np.testing.assert_array_equal(np.asarray(new[name]), a * 2 - 1)
        np.testing.assert_array_equal(np.asarray(tree[name]), 0 * a)


def test_adam_steps_with_update_tree_as_optax_in_memory(rng):
    w = rng.normal(size=(N, D)).astype(np.float32) / 10
    x = rng.normal(size=(64, N)).astype(np.float32) / 30
    y = rng.normal(size=(64, D)).astype(np.float32)
    opt = optax.adam(1e-2)

    def loss(w):
        return jnp.mean((x @ w - y) ** 2)

    traces = []

    @jax.jit
    def step(w, state):
        traces.append(type(w).__name__)
        g = jax.grad(loss)(w)
        updates, state = opt.update(g, state, w)
        return optax.apply_updates(w, updates), state

    ref_w, ref_state = jnp.asarray(w), opt.init(jnp.asarray(w))
    params = disk(w)
    state = opt.init(params)
    for _ in range(3):
        new_w, new_state = step(params, state)
        on_disk = [(t, n) for t, n in zip(jax.tree.leaves(state), jax.tree.leaves(new_state))]
        with jask.stats() as s:
            jask.update_tree_(
                [params, *(t for t, _ in on_disk if isinstance(t, jask.DiskArray))],
                [new_w, *(n for t, n in on_disk if isinstance(t, jask.DiskArray))],
            )
        assert moved(s) == (0, 0)
        state = jax.tree.map(
            lambda t, n: t if isinstance(t, jask.DiskArray) else n, state, new_state
        )
        ref_w, ref_state = step(ref_w, ref_state)
        # adam's step is about its learning rate wherever a gradient is not tiny, whatever
        # its size: a gradient summed in another order moves a near-zero one's step
        np.testing.assert_allclose(np.asarray(params), np.asarray(ref_w), rtol=1e-5, atol=1e-4)
    assert len(traces) == 2  # once for DiskArrays, once for jax.Arrays: the handles stay


def test_two_arrays_given_one_value_update_as_one_tree(rng):
    # optimizer moments set from one zeros array share its file; update_tree_ of both (which
    # refuses two views of one file) takes each its own new value
    a = rng.normal(size=(N, D)).astype(np.float32)
    m, v = disk(a), disk(a)
    zeros = jnp.zeros_like(m)
    m.update_(zeros)
    v.update_(zeros)
    jask.update_tree_((m, v), (m + 1.0, v + 2.0))
    np.testing.assert_array_equal(np.asarray(m), np.ones_like(a))
    np.testing.assert_array_equal(np.asarray(v), np.full_like(a, 2.0))
    np.testing.assert_array_equal(np.asarray(zeros), np.zeros_like(a))
