"""Copies and pickles of DiskArrays, and DiskArrays in orbax and flax checkpoints."""

import copy
import gc
import os
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _serialization
from jask._jax import compat


def grid(shape=(2, 3), dtype=np.float32):
    return np.arange(np.prod(shape), dtype=dtype).reshape(shape)


def disk(values):
    return jask.DiskArray.from_numpy(values)


def check(value, expected):
    value = np.asarray(value)
    assert value.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(value, expected)


# -- copies -------------------------------------------------------------------------------------


def test_a_shallow_copy_shares_the_file_and_outlives_either_name():
    x = disk(grid())
    y = copy.copy(x)
    assert y is not x and y.path == x.path
    del y
    gc.collect()
    check(x, grid())
    y = copy.copy(x)
    del x
    gc.collect()
    check(y, grid())


def test_a_deep_copy_is_an_independent_array():
    x = disk(grid())
    tree = copy.deepcopy({"x": x, "again": x})
    assert tree["x"] is tree["again"]  # deepcopy's memo: one copy per array
    assert tree["x"].path != x.path
    x.update_(x * 0.0)
    check(tree["x"], grid())
    del x
    gc.collect()
    check(tree["x"], grid())


def test_the_copy_method_stays_valid():
    x = disk(grid())
    y = x.copy()
    z = jax.jit(lambda a: a.copy())(x)
    del x
    gc.collect()
    check(y, grid())
    check(z, grid())


# -- pickle -------------------------------------------------------------------------------------


def test_pickling_an_opened_file_refers_to_the_file(tmp_path):
    path = str(tmp_path / "w.npy")
    np.save(path, grid((3, 4), np.int32))
    x = jask.DiskArray.open(path)
    data = pickle.dumps(x)
    assert len(data) < 1000  # the values are not in the pickle
    y = pickle.loads(data)
    assert y.shape == (3, 4) and y.dtype == np.int32 and not y.writable
    assert os.path.samefile(y.path, path)
    check(y, grid((3, 4), np.int32))
    check(pickle.loads(pickle.dumps(x[1])), grid((3, 4), np.int32)[1])


def test_pickling_a_raw_file_keeps_its_offset_dtype_and_mode(tmp_path):
    path = tmp_path / "raw.bin"
    values = grid((4, 2), np.float32)
    path.write_bytes(b"\0" * 16 + values.tobytes())
    x = jask.DiskArray.open(path, shape=(4, 2), dtype="float32", offset=16, mode="r+")
    y = pickle.loads(pickle.dumps(x))
    assert y.writable and y.shape == (4, 2) and y.dtype == np.float32
    check(y, values)


def test_a_scratch_array_pickled_by_value_keeps_its_weak_type():
    # int32 + 0.5 is a weak float32, as jnp types it; a jax.Array's pickle keeps the flag too
    for values in (grid((3, 4), np.int32), grid((3, 4), np.float32)):
        x = disk(values) + 0.5
        want = pickle.loads(pickle.dumps(jnp.asarray(values) + 0.5))
        y = pickle.loads(pickle.dumps(x))
        assert isinstance(y, jask.DiskArray) and y.weak_type == want.weak_type == x.weak_type
        assert y.dtype == want.dtype
        check(y, np.asarray(want))


def test_pickling_a_scratch_array_over_the_budget_names_save(small_budget):
    x = disk(grid((40, 40)))
    small_budget("4KB")
    with pytest.raises(pickle.PicklingError, match=r"6400 bytes.*4096.*x\.save\(path\).*Disk"):
        pickle.dumps({"w": x})


# -- orbax.checkpoint ----------------------------------------------------------------------------


@pytest.fixture
def ocp():
    return pytest.importorskip("orbax.checkpoint")


def test_orbax_pytree_checkpointer_streams_disk_arrays(ocp, tmp_path):
    w = disk(grid((3, 5)))
    tree = {"w": w, "b": np.arange(3.0), "step": 7}
    checkpointer = ocp.PyTreeCheckpointer()
    checkpointer.save(tmp_path / "ckpt", tree)
    saved = tmp_path / "ckpt" / _serialization.ORBAX_FOLDER / "w.npy"
    check(np.load(saved), grid((3, 5)))  # the engine's streamed .npy file
    restored = checkpointer.restore(tmp_path / "ckpt")
    assert isinstance(restored["w"], jask.DiskArray)
    check(restored["w"], grid((3, 5)))
    check(restored["b"], np.arange(3.0))
    assert restored["step"] == 7


def test_orbax_checkpoint_manager_keeps_and_restores_steps(ocp, tmp_path):
    w = disk(grid())
    options = ocp.CheckpointManagerOptions(max_to_keep=2)
    with ocp.CheckpointManager(tmp_path / "run", options=options) as manager:
        for step in range(3):
            manager.save(step, args=ocp.args.PyTreeSave({"w": w + float(step)}))
        manager.wait_until_finished()
        assert manager.all_steps() == [1, 2]
        latest = manager.restore(2, args=ocp.args.PyTreeRestore())
        like = manager.restore(1, args=ocp.args.PyTreeRestore({"w": w}))
    assert isinstance(latest["w"], jask.DiskArray) and isinstance(like["w"], jask.DiskArray)
    check(latest["w"], grid() + 2.0)
    check(like["w"], grid() + 1.0)


def test_orbax_standard_save_and_restore(ocp, tmp_path):
    w = disk(grid((4, 2)))
    tree = {"w": w, "n": np.arange(3.0), "j": jnp.arange(2.0)}
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "std", tree)
    checkpointer.wait_until_finished()
    like = checkpointer.restore(tmp_path / "std", tree)
    with ocp.CheckpointManager(tmp_path / "run") as manager:
        manager.save(0, args=ocp.args.StandardSave(tree))
        manager.wait_until_finished()
        bare = manager.restore(0, args=ocp.args.StandardRestore())
    for restored in (like, bare):
        assert isinstance(restored["w"], jask.DiskArray)
        check(restored["w"], grid((4, 2)))
        check(restored["n"], np.arange(3.0))
        check(restored["j"], np.arange(2.0, dtype=np.float32))


# -- flax.serialization --------------------------------------------------------------------------


@pytest.fixture
def serialization():
    return pytest.importorskip("flax.serialization")


def test_flax_state_dicts_keep_disk_arrays(serialization):
    w = disk(grid())
    tree = {"w": w, "b": jnp.ones(3)}
    state = serialization.to_state_dict(tree)
    assert state["w"] is w
    restored = serialization.from_state_dict(tree, state)
    assert restored["w"] is w
    in_memory = serialization.from_state_dict(tree, {"w": grid() + 1.0, "b": np.ones(3)})
    assert isinstance(in_memory["w"], jask.DiskArray)
    check(in_memory["w"], grid() + 1.0)
    with pytest.raises(ValueError, match=r"'\./w' is float32\[3\].*float32\[2, 3\]"):
        serialization.from_state_dict(tree, {"w": np.zeros(3, np.float32), "b": np.ones(3)})


def test_flax_msgpack_round_trip_within_the_budget(serialization):
    w = disk(grid())
    tree = {"w": w, "b": jnp.ones(3)}
    restored = serialization.from_bytes(tree, serialization.to_bytes(tree))
    assert isinstance(restored["w"], jask.DiskArray)
    check(restored["w"], grid())


def test_in_memory_trees_stop_at_the_budget(small_budget):
    x = disk(grid((64, 64)))
    small_budget("64KB")
    tree = _serialization.in_memory_tree({"x": x, "n": 1}, "msgpack")
    check(tree["x"], grid((64, 64)))
    small_budget("4KB")
    with pytest.raises(ValueError, match=r"16384 bytes.*budget of 4096 bytes.*orbax.*save_tree"):
        _serialization.in_memory_tree({"x": x}, "msgpack")


def test_flax_msgpack_above_the_budget_names_size_and_budget(serialization, small_budget):
    assert "flax_msgpack_budget" in compat.installed_patches()
    x = disk(grid((64, 64)))
    small_budget("4KB")
    with pytest.raises(ValueError, match=r"16384 bytes.*4096 bytes"):
        serialization.to_bytes({"x": x})
