"""jask.distributed and python -m jask.launch: data-parallel runs of 2 and 4 local processes
(gloo collectives) against one process on the concatenated data, a DiskArray gradient
all-reduced block by block, a process dying mid-step, and resuming from a checkpoint.

The runs are tests/distributed_scripts/worker.py started by the launcher: one run per process
count does every check (the launches, not the checks, are what costs time)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jask
import jask.distributed as jd
from bench.distributed import projection
from jask._api import distributed as distributed_impl

from conftest import assert_close

WORKER = Path(__file__).parent / "distributed_scripts" / "worker.py"
SEED_ROWS, MLP_ROWS = 23, 37  # multiples of neither 2 nor 4: the shards differ in size
STEPS, DIE_AT, DIE_RANK, DIE_CODE = 6, 3, 1, 17
LAUNCH_TIMEOUT_S = 300  # a hang fails the test instead of the suite
FAILURE_BOUND_S = 60  # generous: the launcher stops the others 6 s after a failure (grace 1 s)


def write_data(folder: Path, n: int) -> dict:
    rng = np.random.default_rng(0)
    data = {
        "seed_a": rng.random((SEED_ROWS, 6), dtype=np.float32),
        "seed_t": rng.random((SEED_ROWS, 3), dtype=np.float32),
        "mlp_x": rng.standard_normal((MLP_ROWS, 8), np.float32),
    }
    data["mlp_y"] = np.sin(data["mlp_x"][:, :2]) + 0.1 * rng.standard_normal((MLP_ROWS, 2))
    data["mlp_y"] = data["mlp_y"].astype(np.float32)
    folder.mkdir()
    for name, value in data.items():
        np.save(folder / f"{name}.npy", value)
    for name in ("seed_a", "mlp_x"):  # one file per process; the others are shared files
        jd.split_into_shards(folder / f"{name}.npy", folder / f"{name}-{{rank}}.npy", n)
    # The same as safetensors: one shared file, and one file per process.
    jask.save_safetensors(folder / "seed.safetensors", {"a": data["seed_a"], "t": data["seed_t"]})
    for rank in range(n):
        x = np.load(folder / f"mlp_x-{rank}.npy")
        jask.save_safetensors(folder / f"mlp_x-{rank}.safetensors", {"x": x})
    return data


def launch(n: int, data: Path, out: Path, *args: str, grace_s: float | None = None):
    out.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "jask.launch", "-n", str(n)]
    if grace_s is not None:
        command += ["--grace-s", str(grace_s)]
    return subprocess.run(
        [*command, str(WORKER), str(data), str(out), *args],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
        cwd=out,  # each process's scratch folder goes there
    )


def results(out: Path, n: int) -> list[dict]:
    return [dict(np.load(out / f"rank-{r}.npz")) for r in range(n)]


def losses(out: Path) -> dict[int, float]:
    """The last loss process 0 recorded for each step."""
    lines = (out / "losses.jsonl").read_text().splitlines()
    return {record["step"]: record["loss"] for record in map(json.loads, lines)}


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"processes={n}")
def run(request, tmp_path_factory):
    n = request.param
    root = tmp_path_factory.mktemp(f"dist{n}")
    data = write_data(root / "data", n)
    done = launch(n, root / "data", root / "out", "--checks", "--steps", str(STEPS))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return n, root, data, results(root / "out", n), done


def test_launcher_prefixes_output_with_the_rank(run):
    n, _, _, _, done = run
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    for rank in range(n):
        assert any(line.startswith(f"[{rank}] ") for line in lines), lines[-20:]


def test_shards_cover_the_rows_in_process_order(run):
    n, _, _, ranks, _ = run
    spans = [tuple(r["seed_rows"][:2]) for r in ranks]
    assert spans == [jd.row_range(SEED_ROWS, n, p) for p in range(n)]
    assert all(tuple(r["seed_rows"][2:]) == (SEED_ROWS, 6) for r in ranks)


def test_shards_of_safetensors_files_match_the_npy_shards(run):
    n, _, _, ranks, _ = run
    for p, r in enumerate(ranks):
        start, stop = jd.row_range(SEED_ROWS, n, p)
        assert r["format_shared_rows"].tolist() == [start, stop, start, stop]
        assert bool(r["format_shared_equal"])
        start, stop = jd.row_range(MLP_ROWS, n, p)
        assert r["format_own_rows"].tolist() == [start, stop, start, stop, MLP_ROWS, 8]
        assert bool(r["format_own_equal"])


def test_seed_pipeline_matches_one_process(run):
    _, _, data, ranks, _ = run
    a, t = data["seed_a"].astype(np.float64), data["seed_t"].astype(np.float64)
    b, c = (ranks[0][k].astype(np.float64) for k in ("seed_b", "seed_c"))
    residual = 2.0 * (a @ b @ c - t)  # the gradients of sum((a b c - t)^2), by hand
    want_ga, want_gb, want_gc = residual @ (b @ c).T, a.T @ residual @ c.T, (a @ b).T @ residual
    want_loss = np.sum(np.square(a @ b @ c - t))
    for r in ranks:
        assert r["seed_loss"].dtype == np.float32 and r["seed_gb"].dtype == np.float32
        assert_close(r["seed_loss"], want_loss)
        assert_close(r["seed_gb"], want_gb)
        assert_close(r["seed_gc"], want_gc)
        start, stop = r["seed_rows"][:2]
        assert_close(r["seed_ga"], want_ga[start:stop])


def reference_training(data, init):
    """One process, the concatenated data in memory: the same model, loss and optax.adam."""
    x, y = jnp.asarray(data["mlp_x"]), jnp.asarray(data["mlp_y"])

    def loss(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean(jnp.square(h @ p["w2"] + p["b2"] - y))

    opt = optax.adam(0.02)

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    params, state, values = init, opt.init(init), []
    for _ in range(STEPS):
        params, state, value = step(params, state)
        values.append(float(value))
    return params, np.array(values)


def test_mlp_adam_training_matches_one_process(run):
    _, _, data, ranks, _ = run
    init = {k: jnp.asarray(ranks[0][f"init_{k}"]) for k in ("w1", "b1", "w2", "b2")}
    want_params, want_losses = reference_training(data, init)
    for r in ranks:
        assert_close(r["train_losses"], want_losses, rtol=1e-5)
        for k, want in want_params.items():
            assert r[f"train_{k}"].dtype == np.float32
            assert_close(r[f"train_{k}"], want, rtol=1e-4)
    for r in ranks[1:]:  # every process applied the same update to the same gradients
        for k in want_params:
            np.testing.assert_array_equal(r[f"train_{k}"], ranks[0][f"train_{k}"])


def test_disk_array_weight_trained_with_adam_matches_one_process(run):
    """The weight and adam's state on disk on every process, its DiskArray gradient all-reduced
    block by block each step: the same weight as adam on the concatenated data in memory."""
    _, _, data, ranks, _ = run
    x, y = jnp.asarray(data["mlp_x"]), jnp.asarray(data["mlp_y"])
    w = jnp.asarray(ranks[0]["disk_w0"])
    opt = optax.adam(0.02)
    state = opt.init(w)
    grad = jax.jit(jax.grad(lambda w: jnp.mean(jnp.square(x @ w - y))))
    for _ in range(int(ranks[0]["disk_steps"])):
        updates, state = opt.update(grad(w), state, w)
        w = optax.apply_updates(w, updates)
    for r in ranks:
        assert r["disk_w"].dtype == np.float32
        assert_close(r["disk_w"], w, rtol=1e-4)
        np.testing.assert_array_equal(r["disk_w"], ranks[0]["disk_w"])


def test_disk_array_gradient_is_all_reduced_block_by_block(run):
    n, _, _, ranks, _ = run
    local = np.stack([r["block_local"] for r in ranks])
    assert local.shape[1:] == (8, 29)  # 3 blocks of 3 rows (the last of 2) at the test's budget
    for r in ranks:
        assert r["block_sum"].dtype == np.float32
        assert_close(r["block_sum"], local.sum(0))
        assert_close(r["block_sum"], r["block_sum_in_memory"])
        assert_close(r["block_mean"], local.mean(0))
        np.testing.assert_array_equal(r["block_max"], local.max(0))  # one row per block
        assert_close(r["block_scale"], (n - 1) / 2)


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    """Two processes training with a checkpoint after each step; process 1 dies at step 3."""
    root = tmp_path_factory.mktemp("fail")
    write_data(root / "data", 2)
    ckpt = root / "ckpt"
    args = ["--steps", str(STEPS), "--ckpt", str(ckpt)]
    done = launch(2, root / "data", root / "out", *args, "--die-rank", str(DIE_RANK),
                  "--die-at", str(DIE_AT), grace_s=1)  # fmt: skip
    return root, args, done, time.time() - float((root / "out" / "died_at.txt").read_text())


def test_a_dying_process_stops_the_run_naming_its_rank(failed_run):
    _, _, done, seconds = failed_run
    assert done.returncode == DIE_CODE, done.stderr[-4000:]
    assert f"rank {DIE_RANK} exited with code {DIE_CODE}" in done.stderr
    assert "the first process to fail" in done.stderr
    assert 0 < seconds < FAILURE_BOUND_S  # from the death to the launcher's exit


@pytest.mark.parametrize("run", [2], indirect=True, ids=lambda n: f"processes={n}")
def test_training_resumes_from_the_checkpoint_with_identical_losses(run, failed_run):
    _, root, _, ranks, _ = run
    fail_root, args, _, _ = failed_run
    before = losses(fail_root / "out")
    # process 0 finished steps 0 .. DIE_AT - 2 before process 1 could start step DIE_AT, and
    # maybe step DIE_AT - 1 before the launcher stopped it
    assert sorted(before) in (list(range(DIE_AT - 1)), list(range(DIE_AT)))
    resumed = launch(2, fail_root / "data", fail_root / "out", *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    after = losses(fail_root / "out")
    assert sorted(after) == list(range(STEPS))
    uninterrupted = losses(root / "out")
    assert sorted(uninterrupted) == list(range(STEPS))
    resumed_losses = [after[s] for s in range(STEPS)]
    np.testing.assert_array_equal(resumed_losses, [uninterrupted[s] for s in range(STEPS)])
    np.testing.assert_array_equal(resumed_losses, ranks[0]["train_losses"].astype(np.float64))


# One process, in this process: the split rule, the shard helpers and allreduce's checks.


def test_row_range_splits_as_equally_as_possible():
    for rows, n in ((10, 4), (8, 4), (5, 5), (7, 1), (1001, 3)):
        spans = [jd.row_range(rows, n, p) for p in range(n)]
        assert spans[0][0] == 0 and spans[-1][1] == rows
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        sizes = [stop - start for start, stop in spans]
        assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1
    with pytest.raises(ValueError, match="3 rows cannot be split over 4 processes"):
        jd.row_range(3, 4, 0)


def test_split_into_shards_and_open_a_row_range_in_place(tmp_path, small_budget):
    x = np.arange(7 * 3 * 5, dtype=np.float32).reshape(7 * 3, 5)
    np.save(tmp_path / "x.npy", x)
    small_budget("4KB")  # the split streams: 4 KiB blocks of a 420-byte-row array
    paths = jd.split_into_shards(tmp_path / "x.npy", tmp_path / "x-{rank}.npy", 4)
    parts = [np.load(p) for p in paths]
    assert [len(p) for p in parts] == [6, 5, 5, 5]
    np.testing.assert_array_equal(np.concatenate(parts), x)
    assert not [f for f in os.listdir(tmp_path) if "jask-tmp" in f]
    for p in range(4):  # a shared file: each process's rows opened in place, at their offset
        start, stop = jd.row_range(len(x), 4, p)
        whole = jask.DiskArray.open(tmp_path / "x.npy")
        shard = distributed_impl._rows_of_array(whole, "x.npy", "r", 4, p)
        assert isinstance(shard.local, jask.DiskArray)
        assert shard.local.path == str(tmp_path / "x.npy")
        assert (shard.start, shard.stop, shard.global_shape) == (start, stop, x.shape)
        np.testing.assert_array_equal(np.asarray(shard.local), x[start:stop])


def test_shards_of_safetensors_and_zarr_arrays(tmp_path):
    """A tensor of a safetensors file: each process's rows are a view of the file at their
    offset; a compressed Zarr array: they are copied out of the chunks that hold them."""
    import zarr

    x = np.arange(11 * 6, dtype=np.float32).reshape(11, 6) * 0.5
    jask.save_safetensors(tmp_path / "x.safetensors", {"bias": np.ones(3, np.float32), "x": x})
    z = zarr.create_array(tmp_path / "x.zarr", shape=x.shape, chunks=(2, 6), dtype="float32")
    z[:] = x
    for source, raw in (
        (jask.open_safetensors(tmp_path / "x.safetensors")["x"], True),
        (jask.open_zarr(tmp_path / "x.zarr"), False),
    ):
        for p in range(3):
            start, stop = jd.row_range(len(x), 3, p)
            shard = distributed_impl._rows_of_array(source, "x", "r", 3, p)
            assert isinstance(shard.local, jask.DiskArray) and shard.local.dtype == np.float32
            assert (shard.start, shard.stop, shard.global_shape) == (start, stop, x.shape)
            np.testing.assert_array_equal(np.asarray(shard.local), x[start:stop])
            assert (shard.local.path == source.path) == raw
    with pytest.raises(ValueError, match="chunked.*mode='r'"):
        distributed_impl._rows_of_array(jask.open_zarr(tmp_path / "x.zarr"), "x", "r+", 3, 0)
    # One array per process, opened by a function of the rank (here a run of one process).
    shard = jd.open_shard(lambda rank: jask.open_safetensors(tmp_path / "x.safetensors")["x"])
    assert (shard.start, shard.stop, shard.global_shape) == (0, 11, x.shape)
    with pytest.raises(TypeError, match="must open this process's array"):
        jd.open_shard(lambda rank: x)


def test_one_process_runs_alone(tmp_path):
    jd.initialize()  # no coordinator: a run of one process
    assert (jd.process_id(), jd.num_processes()) == (0, 1)
    np.save(tmp_path / "x-0.npy", np.ones((3, 2), np.float32))
    shard = jd.open_shard(str(tmp_path / "x-{rank}.npy"))
    assert (shard.start, shard.stop, shard.global_shape) == (0, 3, (3, 2))
    g = jask.DiskArray.from_numpy(np.ones((3, 2), np.float32))
    tree = {"g": g, "b": np.float32(2.0)}
    assert jd.allreduce(tree, "mean") is tree


def test_allreduce_and_open_shard_refuse_what_they_cannot_do(tmp_path):
    with pytest.raises(ValueError, match="op must be one of sum, mean, max, min"):
        jd.allreduce(np.ones(2), "prod")
    with pytest.raises(TypeError, match="op='mean' needs floating leaves, got int32"):
        jd.allreduce(np.ones(2, np.int32), "mean")
    with pytest.raises(TypeError, match="cannot take traced values"):
        jax.jit(lambda x: jd.allreduce(x))(jnp.ones(2))
    with pytest.raises(ValueError, match="2 paths given for 1 processes"):
        jd.open_shard(["a.npy", "b.npy"])
    with pytest.raises(ValueError, match="must contain"):
        jd.split_into_shards(jask.DiskArray.from_numpy(np.ones(4, np.float32)), "x.npy", 2)
    with pytest.raises(ValueError, match="coordinator address"):
        jd.initialize(num_processes=2, process_id=0)


def test_the_benchmark_projects_from_the_one_process_run():
    record = {"processes": 1, "steps": 10, "local_s": 1.0, "update_s": 0.1}
    runs = {1: [{**record, "gradient_bytes": 1_250_000}]}
    lines = projection(runs, rows=1024 * 100, gbps=10, latency_us=0, dispatch_ms=1.0)
    rows = {int(line.split("|")[1]): line.split("|")[2:] for line in lines if line[:3] == "| 1"}
    # one host: the local step (100 ms) and the update (10 ms); 16: a 16th of the local step,
    # 2 (16 - 1) / 16 * 1.25 MB at 1.25 GB/s = 1.875 ms of all-reduce, and 1 ms of dispatch
    assert [float(v) for v in rows[1][:3]] == [100.0, 0.0, 110.0]
    assert [float(v) for v in rows[16][:3]] == [6.2, 2.88, 19.1]
