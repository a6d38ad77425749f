"""update_ and update_tree_ give each DiskArray its own values: after `p.update_(new)` a later
update of either, rows written in place into either (jask.row_sparse) or an update through a
view leave the other as it was; views of p made before or after an update see p's later ones;
update_tree_ takes every new value as it was before the step (a swap swaps), and refuses a
target twice. Written for issue 34, where an update_ that takes a scratch result's file instead
of copying it was tried and reverted (a review found these broken by it). Values against NumPy
and optax on jax.Arrays."""

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


def test_both_arrays_keep_their_values_across_later_updates(rng):
    a = rng.normal(size=(N, D)).astype(np.float32)
    p = disk(a)
    handle = p.handle
    new = p * 2.0
    assert p.update_(new) is p and p.handle == handle
    np.testing.assert_array_equal(np.asarray(p), a * 2)
    # p updated again: new keeps its values; new updated: p keeps its values
    p.update_(p + 1.0)
    np.testing.assert_array_equal(np.asarray(p), a * 2 + 1)
    np.testing.assert_array_equal(np.asarray(new), a * 2)
    new.update_(disk(a))
    np.testing.assert_array_equal(np.asarray(new), a)
    np.testing.assert_array_equal(np.asarray(p), a * 2 + 1)
    q = p * 1.0
    p.update_(q)
    p.update_(jnp.zeros_like(p))
    np.testing.assert_array_equal(np.asarray(q), a * 2 + 1)


def test_views_see_the_updates_of_their_array(rng):
    a = rng.normal(size=(N, D)).astype(np.float32)
    p = disk(a)
    view = jnp.reshape(p, (D, N))  # the same file
    assert isinstance(view, jask.DiskArray) and view.path == p.path
    p.update_(p * 3.0)
    np.testing.assert_array_equal(np.asarray(view), (a * 3).reshape(D, N))
    new = p + 1.0
    new_view = jnp.reshape(new, (D, N))
    p.update_(new)
    np.testing.assert_array_equal(np.asarray(p), a * 3 + 1)
    np.testing.assert_array_equal(np.asarray(new_view), (a * 3 + 1).reshape(D, N))
    # a view made after an update sees the next one; an update through a view changes its
    # array (the same file) and not the value p was given
    later = jnp.reshape(p, (D, N))
    p.update_(p * 0.0 + 8.0)
    np.testing.assert_array_equal(np.asarray(later), np.full((D, N), 8.0, np.float32))
    given = p + 1.0
    p.update_(given)
    jnp.reshape(p, (D, N)).update_(jnp.full((D, N), 7.0, np.float32) + later * 0)
    np.testing.assert_array_equal(np.asarray(p), np.full((N, D), 7.0, np.float32))
    np.testing.assert_array_equal(np.asarray(given), np.full((N, D), 9.0, np.float32))


def test_rows_written_in_place_leave_the_other_handle_alone(rng):
    start = rng.normal(size=(N, D)).astype(np.float32)
    table = disk(start)
    new = table * 1.0
    table.update_(new)
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
    jask.update_tree_(tree, new)
    for name in tree:
        np.testing.assert_array_equal(np.asarray(tree[name]), a * 2 - 1)
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), a * 2 - 1)
    jask.update_tree_(new, tree)
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
        jask.update_tree_(
            [params, *(t for t, _ in on_disk if isinstance(t, jask.DiskArray))],
            [new_w, *(n for t, n in on_disk if isinstance(t, jask.DiskArray))],
        )
        state = jax.tree.map(
            lambda t, n: t if isinstance(t, jask.DiskArray) else n, state, new_state
        )
        ref_w, ref_state = step(ref_w, ref_state)
        # adam's step is about its learning rate wherever a gradient is not tiny, whatever
        # its size: a gradient summed in another order moves a near-zero one's step
        np.testing.assert_allclose(np.asarray(params), np.asarray(ref_w), rtol=1e-5, atol=1e-4)
    assert len(traces) == 2  # once for DiskArrays, once for jax.Arrays: the handles stay


def test_update_tree_takes_the_values_before_the_step(rng):
    a = rng.normal(size=(N, D)).astype(np.float32)
    x, y = disk(a) + 1.0, disk(a) + 2.0
    jask.update_tree_([x, y], [y, x])  # a swap
    np.testing.assert_array_equal(np.asarray(x), a + 2)
    np.testing.assert_array_equal(np.asarray(y), a + 1)
    p, prev = disk(a) + 1.0, disk(a)
    jask.update_tree_((p, prev), (p * 10.0, p))  # prev takes p's value before the step
    np.testing.assert_array_equal(np.asarray(prev), a + 1)
    np.testing.assert_array_equal(np.asarray(p), (a + 1) * 10)
    with pytest.raises(ValueError, match="one file"):
        jask.update_tree_([p, p], [p + 1.0, p + 2.0])
    np.testing.assert_array_equal(np.asarray(p), (a + 1) * 10)


def test_two_arrays_given_one_value_update_as_one_tree(rng):
    a = rng.normal(size=(N, D)).astype(np.float32)
    m, v = disk(a), disk(a)
    zeros = jnp.zeros_like(m)
    m.update_(zeros)
    v.update_(zeros)
    jask.update_tree_((m, v), (m + 1.0, v + 2.0))
    np.testing.assert_array_equal(np.asarray(m), np.ones_like(a))
    np.testing.assert_array_equal(np.asarray(v), np.full_like(a, 2.0))
    np.testing.assert_array_equal(np.asarray(zeros), np.zeros_like(a))
