"""save_tree / load_tree: round trips, resuming training, crash safety, and errors."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jask

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISK_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "bool"]


def disk(values, dtype="float32"):
    return jask.DiskArray.from_numpy(np.asarray(values).astype(jnp.dtype(dtype)))


def mixed_tree():
    return {
        "disk": [disk(np.arange(6).reshape(2, 3) % 2, dt) for dt in DISK_DTYPES],
        "disk_0d": jask.full((), 2.5),
        "dense": (
            jnp.arange(4, dtype=jnp.float32),
            jnp.asarray(7, jnp.int32),
            jnp.ones((2, 2), jnp.bfloat16),
        ),
        "numpy": {"array": np.arange(3, dtype=np.int16), "scalar": np.float64(0.25)},
        "python": [1, 2.5, True, 1 + 2j],
        "none": None,
        "empty": ((), {}, []),
        "int_keys": {3: [({"deep": jnp.zeros(2)},)], 1: 0.5},
    }


def assert_same_tree(actual, expected):
    assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected)
    expected_leaves = jax.tree_util.tree_leaves(expected)
    for (key, a), e in zip(jax.tree_util.tree_leaves_with_path(actual), expected_leaves):
        assert type(a) is type(e) or (isinstance(a, jax.Array) and isinstance(e, jax.Array)), key
        assert np.shape(a) == np.shape(e) and np.asarray(a).dtype == np.asarray(e).dtype, key
        np.testing.assert_array_equal(
            np.asarray(a), np.asarray(e), err_msg=jax.tree_util.keystr(key)
        )


def test_round_trip_of_mixed_tree(tmp_path):
    tree = mixed_tree()
    jask.save_tree(tmp_path / "ckpt", tree)
    loaded = jask.load_tree(tmp_path / "ckpt")
    assert_same_tree(loaded, tree)
    assert list(loaded) == list(tree)  # dict insertion order survives
    for array in jax.tree_util.tree_leaves(loaded["disk"]):
        # copied into scratch: writable, and independent of the checkpoint's files
        assert array.writable and not array.path.startswith(str(tmp_path / "ckpt"))


def test_checkpoint_is_plain_json_and_npy(tmp_path):
    jask.save_tree(tmp_path / "ckpt", mixed_tree())
    index = json.loads((tmp_path / "ckpt" / "index.json").read_text())
    assert {r["kind"] for r in index["leaves"]} == {
        "disk",
        "jax",
        "numpy",
        "numpy_scalar",
        "python",
    }
    files = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert files == ["index.json"] + [f"leaf_{i:05d}.npy" for i in range(len(index["leaves"]))]
    for record in index["leaves"]:
        if record["dtype"] != "bfloat16":  # NumPy reads bfloat16 only as raw bytes
            array = np.load(tmp_path / "ckpt" / record["file"], allow_pickle=False)
            assert list(array.shape) == record["shape"] and array.dtype.name == record["dtype"]


def test_in_place_mode_opens_the_checkpoint_files_read_only(tmp_path):
    jask.save_tree(tmp_path / "ckpt", {"w": disk(np.ones(5))})
    w = jask.load_tree(tmp_path / "ckpt", mode="r")["w"]
    assert w.path == str(tmp_path / "ckpt" / "leaf_00000.npy") and not w.writable
    # A later save replaces the folder; the open array keeps its own (removed) file.
    jask.save_tree(tmp_path / "ckpt", {"w": w * 3.0})
    np.testing.assert_array_equal(np.asarray(w), np.ones(5, np.float32))
    np.testing.assert_array_equal(
        np.asarray(jask.load_tree(tmp_path / "ckpt")["w"]), np.full(5, 3.0)
    )


def test_optax_adam_state_round_trips_via_like(tmp_path):
    params = {"w": disk(np.ones((13, 3))), "b": disk(np.zeros(3))}
    opt = optax.adam(1e-2)
    state = opt.init(params)
    grads = {"w": disk(np.full((13, 3), 0.5)), "b": disk(np.full(3, -1.0))}
    _, state = jax.jit(opt.update)(grads, state, params)
    jask.save_tree(tmp_path / "ckpt", state)
    loaded = jask.load_tree(tmp_path / "ckpt", like=opt.init(params))
    assert_same_tree(loaded, state)
    assert isinstance(loaded[0], optax.ScaleByAdamState)
    assert isinstance(loaded[0].mu["w"], jask.DiskArray)


def test_like_accepts_shape_dtype_structs(tmp_path):
    tree = {"w": disk(np.ones((4, 2))), "count": jnp.asarray(3, jnp.int32)}
    jask.save_tree(tmp_path / "ckpt", tree)
    assert_same_tree(
        jask.load_tree(
            tmp_path / "ckpt",
            like=jax.eval_shape(
                lambda: {"w": jnp.zeros((4, 2)), "count": jnp.zeros((), jnp.int32)}
            ),
        ),
        tree,
    )


def test_named_tuples_need_like(tmp_path):
    state = optax.adam(1e-2).init(disk(np.ones(3)))
    jask.save_tree(tmp_path / "ckpt", state)
    with pytest.raises(ValueError, match=r"ScaleByAdamState at \[0\].*pass like="):
        jask.load_tree(tmp_path / "ckpt")


def linear_regression(seed=0):
    rng = np.random.default_rng(seed)
    x = disk(rng.uniform(-1, 1, (64, 5)))
    y = disk(rng.uniform(-1, 1, (64, 2)))
    w = disk(rng.uniform(-1, 1, (5, 2)))
    return x, y, w


def loss(w, x, y):
    return jask.sum(jask.square(jask.dot(x, w) - y))


OPT = optax.adam(0.05)
VALUE_AND_GRAD = jax.jit(jax.value_and_grad(loss))
UPDATE = jax.jit(OPT.update)
APPLY = jax.jit(optax.apply_updates)


def train(w, state, x, y, steps):
    losses = []
    for _ in range(steps):
        value, g = VALUE_AND_GRAD(w, x, y)
        updates, state = UPDATE(g, state, w)
        w = w.update_(APPLY(w, updates))
        losses.append(float(value))
    return w, state, losses


def test_resuming_gives_the_same_losses_as_an_uninterrupted_run(tmp_path):
    steps, interrupted_at = 8, 3
    x, y, w = linear_regression()
    _, _, uninterrupted = train(w, OPT.init(w), x, y, steps)

    x, y, w = linear_regression()
    w, state, before = train(w, OPT.init(w), x, y, interrupted_at)
    jask.save_tree(tmp_path / "ckpt", (w, state))
    del w, state
    like = jax.eval_shape(lambda w: (w, OPT.init(w)), jnp.zeros((5, 2), jnp.float32))
    w, state = jask.load_tree(tmp_path / "ckpt", like=like)
    _, _, after = train(w, state, x, y, steps - interrupted_at)
    assert before + after == uninterrupted


# A process that imports jask once, then forks one saver per request, so that
# each killed save costs no jax import. It prints the saver's pid, and the
# saver prints "saving" just before its save starts. The host reaps the saver
# (so that its pid may be reused) only when told to, after any kill, and prints
# its wait status. A request may name a step of save_tree at which the saver
# SIGKILLs itself (ARM_KILL), so that a kill lands there whatever the timing.
SAVER_HOST = r"""
import os, shutil, signal, sys, time
import numpy as np
import jask
from jask import _checkpoint


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def after_calls(function, calls, then):
    count = [0]
    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        count[0] += 1
        if count[0] == calls:
            then()
        return result
    return wrapped


def before_renaming(matches):
    rename = os.rename
    def renaming(src, dst):
        if matches(os.path.basename(str(src))):
            die()
        rename(src, dst)
    os.rename = renaming


def in_the_swap(arm):
    swap = _checkpoint._swap_into_place
    def swapping(folder, path):
        arm()
        swap(folder, path)
    _checkpoint._swap_into_place = swapping


def arm_kill(point):
    if point == "leaf_written":  # the second of the tree's leaves is written
        _checkpoint._write_leaf = after_calls(_checkpoint._write_leaf, 2, die)
    elif point == "index_partial":  # the index is written, under its partial name
        before_renaming(lambda name: name.endswith(".partial"))
    elif point == "folder_written":  # the new folder is complete, nothing renamed
        in_the_swap(die)
    elif point == "old_moved":  # the old checkpoint renamed away, the new one not in place
        in_the_swap(lambda: before_renaming(lambda name: ".tmp-" in name))
    elif point == "swapped":  # the new one in place, the old one not yet removed
        def arm():
            shutil.rmtree = lambda *args, **kwargs: die()
        in_the_swap(arm)
    elif point == "old_half_removed":  # the old one's removal stops after two files
        def arm():
            os.unlink = after_calls(os.unlink, 2, die)
        in_the_swap(arm)
    elif point != "-":
        raise ValueError(point)


for line in sys.stdin:
    path, scratch, value, point = line.split()
    pid = os.fork()
    if pid == 0:
        try:
            jask.set_memory_budget("64MB", scratch_dir=scratch)
            v = int(value)
            big = [jask.DiskArray.from_numpy(np.full(2 << 20, v, np.float32)) for _ in range(4)]
            tree = {"big": big, "small": (np.full(3, v, np.int32), v)}  # 32 MB of DiskArrays
            arm_kill(point)
            print("saving", flush=True)
            start = time.perf_counter()
            jask.save_tree(path, tree)
            print("saved", time.perf_counter() - start, flush=True)
        finally:
            os._exit(0)
    print("pid", pid, flush=True)
    sys.stdin.readline()
    print("reaped", os.waitpid(pid, 0)[1], flush=True)
"""


def read_line(host, prefix):
    line = host.stdout.readline()
    assert line.startswith(prefix), (prefix, line, host.poll())
    return line.split()


def saved_value(path):
    """The one value every leaf of the checkpoint holds; fails on a mix."""
    tree = jask.load_tree(path, mode="r")
    arrays = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]
    values = {float(a.min()) for a in arrays} | {float(a.max()) for a in arrays}
    assert len(values) == 1, f"checkpoint mixes values {sorted(values)}"
    return int(values.pop())


class SaverHost:
    """SAVER_HOST, run as a child process."""

    def __init__(self, tmp_path):
        self.path, self.scratch = tmp_path / "ckpt", tmp_path / "saver_scratch"
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.process = subprocess.Popen(
            [sys.executable, "-c", SAVER_HOST],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def send(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def read_line(self, prefix):
        return read_line(self.process, prefix)

    def start_save(self, value, kill_at="-"):
        """The saver's pid once its save starts."""
        self.send(f"{self.path} {self.scratch} {value} {kill_at}")
        pid = int(self.read_line("pid")[1])
        self.read_line("saving")
        return pid

    def reap(self):
        """The saver's wait status, once it has ended."""
        self.send("reap")
        while (line := self.read_line(""))[0] != "reaped":  # a save that finished said "saved"
            pass
        return int(line[1])

    def close(self):
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
        self.process.__exit__(*exc)  # closes the pipes, waits


# save_tree's steps in order, and the value a kill at each leaves: the old checkpoint's
# until the new folder takes its place, the new one's from when the old one is moved away
# (load_tree then picks the complete new folder, its generation the highest).
KILL_POINTS = [
    ("leaf_written", "old"),
    ("index_partial", "old"),
    ("folder_written", "old"),
    ("old_moved", "new"),
    ("swapped", "new"),
    ("old_half_removed", "new"),
]


def test_a_save_killed_at_each_of_its_steps_leaves_a_complete_checkpoint(tmp_path):
    with SaverHost(tmp_path) as host:
        host.start_save(1)
        assert host.reap() == 0
        current = 1
        for new, (point, left) in enumerate(KILL_POINTS, start=2):
            host.start_save(new, kill_at=point)
            status = host.reap()
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (point, status)
            assert host.path.exists() == (point != "old_moved"), point
            expected = current if left == "old" else new
            assert saved_value(host.path) == expected, point
            current = expected
        host.close()
    jask.save_tree(host.path, {"done": 1})  # removes what the killed savers left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "saver_scratch"]
    assert jask.load_tree(host.path) == {"done": 1}


def test_a_save_killed_at_random_moments_leaves_a_complete_checkpoint(tmp_path, rng):
    """Kills spread over a save and a little past it (seeded): wherever one lands, the
    checkpoint holds one whole save's values, the last or the one before. The steps are
    covered, whatever the timing, by the test above."""
    with SaverHost(tmp_path) as host:
        host.start_save(1)  # an uninterrupted save, to time one
        duration = float(host.read_line("saved")[1])
        host.reap()
        current, runs, interrupted = 1, 10, 0
        for run in range(runs):
            new = 2 + run
            pid = host.start_save(new)
            time.sleep(duration * 1.2 * (run + rng.uniform()) / runs)
            os.kill(pid, signal.SIGKILL)
            host.reap()
            value = saved_value(host.path)
            assert value in (current, new), f"run {run}: expected {current} or {new}, found {value}"
            interrupted += value == current
            current = value
        host.close()
    print(f"{interrupted} of {runs} kills landed before their save completed")
    jask.save_tree(host.path, {"done": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "saver_scratch"]


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_load_recovers_a_save_that_died_between_its_renames(tmp_path):
    path, pid = tmp_path / "ckpt", dead_pid()
    jask.save_tree(path, {"x": disk(np.ones(3))})
    shutil.copytree(path, tmp_path / "ones")
    jask.save_tree(path, {"x": disk(np.full(3, 2.0))})
    old, new = tmp_path / f"ckpt.old-{pid}-0a", tmp_path / f"ckpt.tmp-{pid}-0b"
    os.rename(tmp_path / "ones", old)
    os.rename(path, new)
    # The state after `path` was renamed away and before the new folder took its place:
    np.testing.assert_array_equal(np.asarray(jask.load_tree(path)["x"]), np.full(3, 2.0))
    # Before the new folder's index was written, it is not a checkpoint yet:
    os.remove(new / "index.json")
    np.testing.assert_array_equal(np.asarray(jask.load_tree(path)["x"]), np.ones(3))
    # The next save keeps the recovered checkpoint until its own is in place, then clears both.
    jask.save_tree(path, {"x": disk(np.full(3, 3.0))})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert json.loads((path / "index.json").read_text())["generation"] == 2  # one past `old`


def test_save_removes_only_the_leftovers_of_dead_processes(tmp_path):
    path = tmp_path / "ckpt"
    jask.save_tree(path, {"x": 1})
    dead, alive = tmp_path / f"ckpt.tmp-{dead_pid()}-1c", tmp_path / f"ckpt.tmp-{os.getpid()}-2d"
    unrelated = tmp_path / "ckpt.tmp-notes"
    for folder in (dead, alive, unrelated):
        folder.mkdir()
    jask.save_tree(path, {"x": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["ckpt", alive.name, unrelated.name]
    )


def test_missing_checkpoint_raises_file_not_found_naming_it(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=re.escape(f"no checkpoint at {tmp_path / 'nowhere'}")
    ):
        jask.load_tree(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(
        FileNotFoundError, match="plain is not a jask checkpoint: it has no index.json"
    ):
        jask.load_tree(tmp_path / "plain")


def test_like_with_another_shape_or_dtype_raises_naming_the_leaf(tmp_path):
    jask.save_tree(tmp_path / "ckpt", {"layer": {"w": disk(np.ones((4, 2)))}})
    message = (
        r"leaf \['layer'\]\['w'\] has shape \(4, 2\) and dtype float32 in the checkpoint, "
        r"but shape \(3, 2\) and dtype float32 in like="
    )
    with pytest.raises(ValueError, match=message):
        jask.load_tree(tmp_path / "ckpt", like={"layer": {"w": jnp.zeros((3, 2))}})
    with pytest.raises(ValueError, match=r"\['w'\] has shape \(4, 2\) .* and dtype int32 in like="):
        jask.load_tree(tmp_path / "ckpt", like={"layer": {"w": jnp.zeros((4, 2), jnp.int32)}})


def test_like_with_another_structure_raises_naming_the_leaf(tmp_path):
    jask.save_tree(tmp_path / "ckpt", {"w": disk(np.ones(2)), "b": disk(np.ones(2))})
    with pytest.raises(
        ValueError, match=r"leaf #0 is \['b'\] in the checkpoint but \['bias'\] in "
    ):
        jask.load_tree(tmp_path / "ckpt", like={"w": jnp.ones(2), "bias": jnp.ones(2)})
    with pytest.raises(
        ValueError, match=r"leaf #1 is \['w'\] in the checkpoint but nothing in like="
    ):
        jask.load_tree(tmp_path / "ckpt", like={"b": jnp.ones(2)})


def test_save_refuses_to_replace_what_is_not_a_checkpoint(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="data exists and is not a jask checkpoint"):
        jask.save_tree(tmp_path / "data", {"x": 1})
    assert (tmp_path / "data" / "notes.txt").read_text() == "keep me"


def test_unsupported_leaves_raise_before_anything_is_written(tmp_path):
    with pytest.raises(TypeError, match=r"leaf \['name'\] is a str"):
        jask.save_tree(tmp_path / "ckpt", {"name": "adam", "x": 1})
    with pytest.raises(TypeError, match=r"leaf \['big'\] .* no fixed-size NumPy dtype"):
        jask.save_tree(tmp_path / "ckpt", {"big": 2**70})
    with pytest.raises(TypeError, match=r"leaf \[0\] is a traced value"):
        jax.jit(lambda x: jask.save_tree(tmp_path / "ckpt", [x]))(jnp.ones(2))
    assert list(tmp_path.iterdir()) == []


def test_load_checks_its_mode(tmp_path):
    jask.save_tree(tmp_path / "ckpt", [1])
    with pytest.raises(ValueError, match="mode must be one of"):
        jask.load_tree(tmp_path / "ckpt", mode="r+")
