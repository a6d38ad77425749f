"""The benchmark's W6-W8 (bench/training.py) at a tiny size: every contender runs, their checks agree,
and they agree with references computed here in NumPy.

The contenders run in this process (each `python -m bench.run_one` child would import JAX again);
one harness run checks the records the table is made from.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jask
from bench import training
from bench.report import CHECK_RTOL, _rel_diff
from bench.workloads import WORKLOADS, Context, arrays, generate

from conftest import DEFAULT_BUDGET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# W6's dataset 8 MiB, W7 8 x 512 x 512, W8 16777 rows; jask.row_sparse holds 7 MiB of rows per batch
SIZE, BUDGET = int(0.004 * 2**30), 8 << 20
HAS_DASK = importlib.util.find_spec("dask") is not None
HAS_ROW_SPARSE = hasattr(jask, "row_sparse")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, scratch_root):
    folder = tmp_path_factory.mktemp("bench_training")
    generate(arrays(SIZE, BUDGET), ["f6", "t6", "w7", "e8", "e8d"], str(folder), log=lambda _: None)
    yield folder
    jask.set_memory_budget(DEFAULT_BUDGET, scratch_dir=scratch_root)  # Context.jask moved it


def checks(data_dir, tmp_path, workload: str, contenders) -> dict[str, list[float]]:
    """Each contender's check numbers, run as the harness runs it (setup, then run, then check)."""
    out = {}
    for name in contenders:
        out_dir = tmp_path / f"{workload}-{name}"
        out_dir.mkdir()
        ctx = Context(str(data_dir), str(out_dir), BUDGET, arrays(SIZE, BUDGET))
        trial = WORKLOADS[workload].contenders[name](ctx)
        out[name] = trial.check(trial.run())
        assert all(np.isfinite(out[name])), (name, out[name])
    return out


def assert_agree(results: dict[str, list[float]], reference: list[float]) -> None:
    for name, values in results.items():
        assert _rel_diff(values, reference) <= CHECK_RTOL, (name, values, reference)


def test_w6_contenders_train_the_same_mlp(data_dir, tmp_path):
    names = ["jask", "numpy", "jax"] + (["dask"] if HAS_DASK else [])
    results = checks(data_dir, tmp_path, "W6", names)
    # the same steps in NumPy float64: forward, backward and adam written out
    plan = arrays(SIZE, BUDGET)
    X = np.load(data_dir / plan["f6"].filename).astype(np.float64)
    T = np.load(data_dir / plan["t6"].filename).astype(np.float64)
    params = [np.asarray(p, np.float64) for pair in training.mlp_init() for p in pair]
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    losses = []
    batches = training.w6_batches(X.shape[0], training.w6_steps(plan))
    assert batches.shape == (training.w6_steps(plan), training.W6_BATCH) == (8, 1024)
    for count, idx in enumerate(batches, 1):
        w1, b1, w2, b2 = params
        x, t = X[idx], T[idx]
        z = x @ w1 + b1
        h = np.maximum(z, 0)
        r = h @ w2 + b2 - t
        losses.append(np.mean(r**2))
        gy = 2 * r / r.size
        gh = (gy @ w2.T) * (z > 0)
        grads = [x.T @ gh, gh.sum(0), h.T @ gy, gy.sum(0)]
        for k, g in enumerate(grads):
            m[k] = training.B1 * m[k] + (1 - training.B1) * g
            v[k] = training.B2 * v[k] + (1 - training.B2) * g**2
            mh, vh = m[k] / (1 - training.B1**count), v[k] / (1 - training.B2**count)
            params[k] = params[k] - training.LR * mh / (np.sqrt(vh) + training.EPS)
    reference = [np.mean(losses), np.linalg.norm(np.concatenate([p.ravel() for p in params]))]
    assert_agree(results, reference)


def test_w7_contenders_compute_the_same_forward_pass(data_dir, tmp_path):
    results = checks(data_dir, tmp_path, "W7", ["jask", "numpy", "safetensors", "jax"])
    plan = arrays(SIZE, BUDGET)
    assert plan["w7"].shape == (8, 512, 512)
    W = np.load(data_dir / plan["w7"].filename)
    h = np.asarray(training.w7_batch(512), np.float64)
    for w in W:
        h = np.maximum(h @ w, 0)
    assert_agree(results, [np.linalg.norm(h), h.mean()])
    # the safetensors file holds the same layers
    from safetensors.numpy import load_file

    tensors = load_file(data_dir / plan["w7"].filename.replace(".npy", ".safetensors"))
    assert sorted(tensors) == sorted(f"layers.{i}.weight" for i in range(8))
    np.testing.assert_array_equal(tensors["layers.3.weight"], W[3])


def lazy_adam_reference(table, steps: int):
    """W8's training in NumPy float64: the row-sparse (lazy) adam of the touched rows, and w's adam."""
    table = table.astype(np.float64)
    m, v = np.zeros_like(table), np.zeros_like(table)
    w = np.asarray(training.w8_init(), np.float64)
    wm, wv = np.zeros_like(w), np.zeros_like(w)
    ids, ys = training.w8_stream(table.shape[0], steps)
    B1, B2, LR, EPS = training.B1, training.B2, training.LR, training.EPS
    losses = []
    for count, (idx, y) in enumerate(zip(ids, ys), 1):
        rows = table[idx]
        r = rows @ w - y
        losses.append(np.mean(r**2))
        grow, gw = 2 * r[:, None] * w[None, :] / r.size, rows.T @ (2 * r / r.size)
        uniq, inverse = np.unique(idx, return_inverse=True)
        g = np.zeros((uniq.size, table.shape[1]))
        np.add.at(g, inverse, grow)
        m[uniq] = B1 * m[uniq] + (1 - B1) * g
        v[uniq] = B2 * v[uniq] + (1 - B2) * g**2
        mh, vh = m[uniq] / (1 - B1**count), v[uniq] / (1 - B2**count)
        table[uniq] -= LR * mh / (np.sqrt(vh) + EPS)
        wm, wv = B1 * wm + (1 - B1) * gw, B2 * wv + (1 - B2) * gw**2
        w = w - LR * (wm / (1 - B1**count)) / (np.sqrt(wv / (1 - B2**count)) + EPS)
    return losses, w, table, ids


def w8_reference(data_dir, name: str, steps: int) -> list[float]:
    original = np.load(data_dir / arrays(SIZE, BUDGET)[name].filename)
    losses, w, table, ids = lazy_adam_reference(original, steps)
    last = np.sort(ids[-1])
    return [np.mean(losses), np.linalg.norm(w), np.linalg.norm(table[last] - original[last])]


def test_w8_contenders_train_the_same_embeddings(data_dir, tmp_path):
    names = ["numpy", "jax"] + (["jask"] if HAS_ROW_SPARSE else [])
    ids, _ = training.w8_stream(arrays(SIZE, BUDGET)["e8"].shape[0], training.W8_STEPS)
    assert len(np.unique(ids)) < ids.size  # duplicates in a batch: their gradients are summed
    results = checks(data_dir, tmp_path, "W8", names)
    assert_agree(results, w8_reference(data_dir, "e8", training.W8_STEPS))
    # the table file every contender starts from is untouched: each trains a copy
    plan = arrays(SIZE, BUDGET)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    generate(plan, ["e8"], str(fresh), log=lambda _: None)
    np.testing.assert_array_equal(
        np.load(data_dir / plan["e8"].filename), np.load(fresh / plan["e8"].filename)
    )


def test_w8d_dense_step_matches_lazy_adam_on_its_first_step(data_dir, tmp_path):
    """At the first step dense adam and lazy adam agree on the touched rows (untouched rows get a zero
    gradient, so m and v stay zero and their update is 0 / (0 + eps) = 0)."""
    results = checks(data_dir, tmp_path, "W8d", ["jask", "jax"])
    assert_agree(results, w8_reference(data_dir, "e8d", 1))


def test_harness_records_items_and_limits(tmp_path):
    """One harness run: W7's records count passes per second and carry its bound."""
    out = tmp_path / "results.json"
    subprocess.run(
        [sys.executable, "-m", "bench", "--size-gib", "0.004", "--budget", "1MB", "--repeat", "1"]
        + ["--cap", "none", "--workloads", "W7", "--contenders", "jask,numpy"]
        + ["--data", str(tmp_path / "data")]
        + ["--out", str(out), "--markdown", str(tmp_path / "BENCHMARKS.md")],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    records = json.loads(out.read_text())
    assert [r["contender"] for r in records] == ["jask", "numpy"]
    for r in records:
        assert r["error"] is None, r["error"]
        assert r["unit"] == "passes/s" and r["items"] == 1
        assert r["throughput"] == pytest.approx(1 / r["seconds"])
        assert r["minimal_read_bytes"] == 8 * 512 * 512 * 4 <= 1.1 * r["read_bytes"]
        assert r["limit_seconds"] > 0 and r["check_rel_diff"] < CHECK_RTOL
