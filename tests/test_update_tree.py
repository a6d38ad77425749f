"""jask.update_tree_ updates a pytree of DiskArrays as one step: values as NumPy computes them,
clear errors, and after a SIGKILL at any moment every leaf at the old step or every leaf at the
new one."""

import random
import shutil
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_update_crash import child_env, kill_after_first_line

import jask

REPO = Path(__file__).resolve().parents[1]


def transaction_files(*folders):
    return sorted(f.name for d in folders for f in Path(d).iterdir() if ".jask-txn-" in f.name)


def saved(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return jask.DiskArray.open(path, mode="r+")


def test_update_tree_writes_every_leaf_as_numpy_computes_it(tmp_path, rng):
    w = rng.standard_normal((64, 8)).astype(np.float32)
    counts = rng.integers(-5, 5, (100,)).astype(np.int32)
    half = rng.standard_normal((3, 5)).astype(np.float16)
    tree = {
        "w": saved(tmp_path / "a" / "w.npy", w),
        "layers": [saved(tmp_path / "b" / "counts.npy", counts), jask.DiskArray.from_numpy(half)],
        "h": (saved(tmp_path / "a" / "half.npy", half),),
    }
    new = {
        "w": tree["w"] * 2.0 - 1.0,
        "layers": [tree["layers"][0] + 3, jask.DiskArray.from_numpy(half * 3)],
        "h": (jnp.square(tree["h"][0]),),
    }
    assert jask.update_tree_(tree, new) is tree
    np.testing.assert_allclose(np.load(tmp_path / "a" / "w.npy"), w * 2 - 1, rtol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "b" / "counts.npy"), counts + 3)
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "half.npy"), np.square(half))
    np.testing.assert_allclose(np.asarray(tree["w"]), w * 2 - 1, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(tree["layers"][1]), half * 3)
    assert np.load(tmp_path / "b" / "counts.npy").dtype == np.int32
    assert transaction_files(tmp_path / "a", tmp_path / "b") == []


def test_update_tree_errors_name_the_leaf_and_change_nothing(tmp_path):
    a = saved(tmp_path / "a.npy", np.zeros(4, np.float32))
    b = saved(tmp_path / "b.npy", np.zeros(4, np.float32))
    ro = jask.DiskArray.open(tmp_path / "b.npy")
    ones = jask.full((4,), 1.0)
    with pytest.raises(TypeError, match=r"targets\['b'\] is a ndarray, not a DiskArray"):
        jask.update_tree_({"a": a, "b": np.zeros(4)}, {"a": ones, "b": ones})
    with pytest.raises(TypeError, match=r"new_values\['b'\] is a int"):
        jask.update_tree_({"a": a, "b": b}, {"a": ones, "b": 1})
    with pytest.raises(ValueError, match="must have the structure of targets"):
        jask.update_tree_({"a": a, "b": b}, {"a": ones})
    with pytest.raises(ValueError, match=r"float32\[5\].*of targets\[1\] does not match"):
        jask.update_tree_([a, b], [ones, jask.full((5,), 1.0)])
    with pytest.raises(ValueError, match=r"targets\[0\] and targets\[1\] are arrays of one file"):
        jask.update_tree_([a, a.reshape(2, 2)], [ones, ones.reshape(2, 2)])
    with pytest.raises(
        PermissionError, match=r"targets\[1\] \(.*b\.npy\): it was opened read-only"
    ):
        jask.update_tree_([a, ro], [ones, ones])
    with pytest.raises(TypeError, match="cannot run inside jax.jit"):
        jax.jit(lambda x: jask.update_tree_([a], [x]))(ones)
    np.testing.assert_array_equal(np.asarray(a), np.zeros(4))
    assert transaction_files(tmp_path) == []


FILES = ("w.npy", "sub/m.npy", "sub/deeper/v.npy")
SHAPE = (128, 64)

# Adam-like jitted steps over w, m, v (step k: w = k, m = 2k, v = 3k everywhere), each step
# committed with update_tree_; prints the step it is about to commit.
CHILD = """
import sys
import jax
import jask
folder, scratch = sys.argv[1], sys.argv[2]
jask.set_memory_budget("64KB", scratch_dir=scratch)
state = [jask.DiskArray.open(f"{folder}/{name}", mode="r+") for name in sys.argv[3:]]

@jax.jit
def step(w, m, v):
    g = w * 0.0 + 1.0
    return w + g, m + 2.0 * g, v + 3.0 * g * g

k = 0
while True:
    k += 1
    new = step(*state)
    print(k, flush=True)
    jask.update_tree_(state, list(new))
"""


def start_state(folder):
    for name in FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        np.save(folder / name, np.zeros(SHAPE, np.float32))


def steps_on_disk(folder, mode="r"):
    """Each file's step (w = k, m = 2k, v = 3k), after an open of each with `mode`: read-only
    reads the committed step and changes nothing (it warns of a step a dead writer committed);
    mode="r+" finishes or undoes what a dead writer left."""
    steps = {}
    # Writable opens go last to first: the record lies beside the first leaf, and the open that
    # finishes the last file of the step in that folder removes it.
    order = list(zip((1, 2, 3), FILES))
    for scale, name in order if mode == "r" else reversed(order):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "(?s).*mode=.r\\+. to finish", RuntimeWarning)
            data = np.asarray(jask.DiskArray.open(folder / name, mode=mode))
        assert data.min() == data.max(), f"{name} torn: {data.min()} .. {data.max()}"
        steps[name] = float(data[0, 0]) / scale
    return [steps[name] for name in FILES]


def kill_during_steps(folder, delay):
    start_state(folder)
    printed = kill_after_first_line(
        [sys.executable, "-c", CHILD, str(folder), str(folder / "scratch"), *FILES], delay
    )
    about_to_commit = printed[-1]
    leftovers = transaction_files(*{(folder / name).parent for name in FILES})
    return about_to_commit, leftovers


def test_sigkill_during_training_steps_leaves_every_leaf_at_one_step(tmp_path):
    seed = 1234
    runs = 10
    delays = [random.Random(seed + i).uniform(0, 0.5) for i in range(runs)]
    folders = [tmp_path / f"run{i}" for i in range(runs)]
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(kill_during_steps, folders, delays))
    for folder, delay, (about_to_commit, _) in zip(folders, delays, results):
        where = f"{folder.name} (killed {delay:.3f} s in, committing step {about_to_commit})"
        steps = steps_on_disk(folder)
        assert len(set(steps)) == 1, f"{where}: leaves at different steps {steps}"
        assert steps[0] in (about_to_commit - 1, about_to_commit), f"{where}: at {steps}"
        assert steps_on_disk(folder, mode="r+") == steps, where
        assert transaction_files(*{(folder / n).parent for n in FILES}) == [], where
        shutil.rmtree(folder)
    print(f"{sum(bool(r[1]) for r in results)} of {runs} kills left transaction files")


def killed_after_commit(folder, point):
    start_state(folder)
    one_step = CHILD.replace("while True:", "for _ in range(1):")
    return subprocess.run(
        [sys.executable, "-c", one_step, str(folder), str(folder / "scratch"), *FILES],
        capture_output=True,
        text=True,
        env=child_env(JASK_TEST_CRASH_AT=point),
        timeout=120,
    )


def test_a_step_killed_after_its_commit_is_read_by_read_only_opens_and_finished_by_writable_ones(
    tmp_path,
):
    # Killed after the commit record, and after the first of the three renames.
    points = ["update_tree_committed", "update_tree_renamed_one"]
    folders = [tmp_path / point for point in points]
    with ThreadPoolExecutor(len(points)) as pool:
        children = list(pool.map(killed_after_commit, folders, points))
    for folder, point, child in zip(folders, points, children):
        assert child.returncode == -9, (point, child.stderr)
        left = transaction_files(folder, folder / "sub", folder / "sub" / "deeper")
        journals = [f for f in left if f.endswith(".journal")]
        assert len(journals) == 1, (point, left)
        # A read-only open reads the committed step and renames nothing.
        with pytest.warns(RuntimeWarning, match=r"(?s)committed its new values.*mode=\"r\+\""):
            x = jask.DiskArray.open(folder / FILES[2])
        np.testing.assert_array_equal(np.asarray(x), np.full(SHAPE, 3.0))
        assert steps_on_disk(folder) == [1.0, 1.0, 1.0], point
        assert transaction_files(folder, folder / "sub", folder / "sub" / "deeper") == left, point
        # Each leaf opened for writing finishes the step in its own folder; the last one (the
        # first leaf, beside which the record lies) removes the record.
        assert steps_on_disk(folder, mode="r+") == [1.0, 1.0, 1.0], point
        assert transaction_files(folder, folder / "sub", folder / "sub" / "deeper") == [], point
        assert steps_on_disk(folder) == [1.0, 1.0, 1.0], point
