"""The memory budget bounds everything Jask holds at once (issue 12).

Three parts, from the most precise to the most realistic:
- the engine's own count of its block buffers (every block is an `AlignedBuffer`, counted when
  mapped and unmapped): for each op family, eager and jitted, the peak stays within the budget
  less what the program's XLA buffers take, their whole pages included; engine calls from several
  threads take turns instead of adding up;
- XLA's side: what a compiled program holds in memory is read from its memory analysis and kept
  out of the blocks its engine calls plan;
- a jitted MLP loss, gradient and adam step in a child under a hard cgroup memory cap of
  budget + runtime baseline + a constant, on data four times the cap (pytest-memray's
  measurements of the same are in test_memory_limits.py).
"""

import functools
import json
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_zero_materialization import (
    RSS_ANON,
    _run_capped,
    _write_uniform,
    capped_cgroup,
    disk_folder,
)

import jask

assert disk_folder  # a fixture, used by name below

MiB = 1 << 20
BUDGET = 1 * MiB
ROWS, COLS = 1531, 1029  # 6 MiB of float32 per array: many blocks, no multiple of any


@pytest.fixture(scope="module")
def data():
    jask.set_memory_budget(BUDGET)
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    yn = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    w = rng.standard_normal((COLS, 37), dtype=np.float32)
    idx = rng.integers(0, ROWS, 300)
    arrays = dict(
        x=jask.DiskArray.from_numpy(xn),
        y=jask.DiskArray.from_numpy(yn),
        w=jnp.asarray(w),
        wd=jask.DiskArray.from_numpy(w),
        idx=jnp.asarray(idx),
    )
    in_memory = dict(x=jnp.asarray(xn), y=jnp.asarray(yn), w=jnp.asarray(w), idx=jnp.asarray(idx))
    in_memory["wd"] = in_memory["w"]
    yield arrays, in_memory
    jask.set_memory_budget("64MB")


# Each family as a function of the arrays; the reference is the same function on jnp arrays.
FAMILIES = {
    "elementwise": lambda a: a["x"] * 2 + a["y"],
    "sum": lambda a: jnp.sum(a["x"] * a["y"]),
    "sum_axis0": lambda a: a["x"].sum(axis=0),
    "max_axis1": lambda a: a["x"].max(axis=1),
    "cumsum_axis0": lambda a: jnp.cumsum(a["x"], axis=0),
    "argmax_axis1": lambda a: jnp.argmax(a["x"], axis=1),
    "sort_axis1": lambda a: jnp.sort(a["x"], axis=1),
    "matmul_in_memory_w": lambda a: a["x"] @ a["w"],
    "matmul_disk_w": lambda a: a["x"] @ a["wd"],
    "xT_y": lambda a: a["x"].T @ a["y"],
    "transpose": lambda a: a["x"].T * 1.0,
    "gather_rows": lambda a: a["x"][a["idx"]],
    "concatenate": lambda a: jnp.concatenate([a["x"], a["y"]], axis=1),
    "strided_slice": lambda a: a["x"][5:1400:2] + 1,
    "update_slice": lambda a: a["x"].at[3:700].set(1.0),
}


def _block_limit(held: int = 0) -> int:
    """The most block bytes an engine call may hold when its program holds `held` bytes."""
    return BUDGET - min(held, BUDGET // 2)


def _held_by(jitted, *args) -> int:
    """What XLA holds in memory while the compiled program runs."""
    analysis = jitted.lower(*args).compile().memory_analysis()
    return analysis.temp_size_in_bytes + analysis.output_size_in_bytes


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_block_buffers_stay_within_the_budget(data, family, mode):
    arrays, in_memory = data
    run = FAMILIES[family]
    fn = (lambda: run(arrays)) if mode == "eager" else jax.jit(lambda a: run(a))
    held = 0 if mode == "eager" else _held_by(fn, arrays)
    jask.reset_memory_peak()
    out = fn() if mode == "eager" else fn(arrays)
    jax.block_until_ready(out)
    stats = jask.memory_stats()
    # values and dtype first: the bound is no use on a wrong answer
    want = np.asarray(run(in_memory))
    got = np.asarray(out)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * max(1.0, np.abs(want).max()))
    assert 0 < stats["blocks_peak"] <= _block_limit(held), stats


@pytest.mark.parametrize("budget", [200_000, 256 << 10, 3_000_000])
def test_budgets_of_any_size_bound_the_buffers_pages_included(data, budget):
    """Block buffers are whole pages, and a read buffer keeps a page more to land O_DIRECT reads
    at the file's alignment: plans count both, so budgets that are no multiple of a page or of
    a block bound the pages mapped too (before, up to 16 KiB over at 1 MiB)."""
    arrays, _ = data
    over = {}
    try:
        jask.set_memory_budget(budget)
        for family, run in FAMILIES.items():
            for mode in ("eager", "jit"):
                fn = functools.partial(run, arrays) if mode == "eager" else jax.jit(run)
                held = 0 if mode == "eager" else _held_by(fn, arrays)
                jask.reset_memory_peak()
                jax.block_until_ready(fn() if mode == "eager" else fn(arrays))
                peak = jask.memory_stats()["blocks_peak"]
                if not 0 < peak <= budget - min(held, budget // 2):
                    over[f"{family}-{mode}"] = peak - (budget - min(held, budget // 2))
    finally:
        jask.set_memory_budget(BUDGET)
    assert not over, over


def test_engine_calls_from_threads_take_turns(data):
    """Four threads summing at once hold one budget's worth of blocks, not four."""
    arrays, in_memory = data
    xn = np.asarray(in_memory["x"])
    copies = [arrays["x"] + float(k) for k in range(4)]
    results = [None] * 4
    start = threading.Barrier(4)

    def work(k):
        start.wait()
        results[k] = float(jnp.sum(copies[k] * copies[k]))

    jask.reset_memory_peak()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert jask.memory_stats()["blocks_peak"] <= BUDGET
    for k in range(4):
        want = np.sum((xn.astype(np.float64) + k) ** 2)
        assert results[k] == pytest.approx(want, rel=1e-4)


def test_a_programs_in_memory_buffers_are_kept_out_of_its_blocks(data):
    """XLA's temporaries and in-memory results of a jitted program, from its compiled memory
    analysis, are what its engine calls leave out of the budget."""
    arrays, in_memory = data
    big = 64 * 1024  # 256 KiB of float32 held in memory by the program: a quarter of the budget

    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w)), jnp.arange(big, dtype=jnp.float32) * w[0, 0]

    compiled = jax.jit(f).lower(arrays["x"], arrays["w"]).compile()
    analysis = compiled.memory_analysis()
    held = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
    assert held >= big * 4
    assert jask.memory_stats()["largest_program"] >= held
    jask.reset_memory_peak()
    total, ramp = jax.jit(f)(arrays["x"], arrays["w"])
    assert float(total) == pytest.approx(
        np.sum(np.tanh(np.asarray(in_memory["x"], np.float64) @ np.asarray(in_memory["w"]))),
        rel=1e-4,
    )
    assert ramp.shape == (big,)
    assert jask.memory_stats()["blocks_peak"] <= BUDGET - held


def test_a_program_holding_more_than_half_the_budget_leaves_blocks_half(data):
    arrays, _ = data
    big = 3 * BUDGET // 4  # three quarters of the budget in one in-memory result

    def f(x):
        return jnp.sum(x * x), jnp.ones((big,), jnp.uint8)

    jask.reset_memory_peak()
    jax.block_until_ready(jax.jit(f)(arrays["x"]))
    assert jask.memory_stats()["blocks_peak"] <= BUDGET // 2


def test_eager_calls_plan_in_the_whole_budget(data):
    arrays, _ = data
    jask.reset_memory_peak()
    float(jnp.sum(arrays["x"]))
    assert jask.memory_stats()["blocks_peak"] > BUDGET // 2


def test_budget_error_names_the_budget_that_works_inside_a_program(data):
    """Inside a jitted program holding memory of its own, the smallest budget the error names
    counts what the program holds: setting it makes the program run."""
    arrays, _ = data
    x = jask.DiskArray.from_numpy(np.asarray(arrays["x"][:300, :200]))
    hold = 2048  # float32 elements the program returns in memory: 8 KiB

    def f(x):
        return x + x, jnp.ones((hold,), jnp.float32)

    try:
        jask.set_memory_budget(2048)  # half of it held for the program: 1024 for blocks
        with pytest.raises(Exception, match=r"jask.set_memory_budget\((\d+)\)") as info:
            jax.block_until_ready(jax.jit(f)(x))
        message = str(info.value)
        assert "held for the in-memory buffers of jitted programs" in message
        needed = int(message.rsplit("set_memory_budget(", 1)[1].split(")")[0])
        jask.set_memory_budget(needed)
        total, ones = jax.jit(f)(x)
        np.testing.assert_array_equal(np.asarray(total), 2 * np.asarray(x))
        assert ones.shape == (hold,)
    finally:
        jask.set_memory_budget(BUDGET)


# -- a jitted MLP and adam step under a hard memory cap ----------------------------------------

CAPPED_BUDGET = 48 * MiB
# What a process holds once, from its first step on, outside any budget, measured with the
# child below: OpenBLAS's packing workspace (about 20 MiB touched on the first product) and
# XLA's and the engine threads' first allocations (about 20 MiB); the rest is margin.
RUNTIME_CONSTANT = 64 * MiB
FEATURES, HIDDEN = 256, 128

MLP_CHILD = (
    r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np, optax, jask
"""
    + RSS_ANON
    + r"""

data, scratch, budget, run = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "run"
jask.set_memory_budget(budget, scratch_dir=scratch)
x, y = (jask.DiskArray.open(f"{data}/{name}.npy") for name in "xy")
params = {k: jnp.asarray(np.load(f"{data}/{k}.npy")) for k in ("w1", "b1", "w2", "b2")}

def loss(p, x, y):
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

opt = optax.adam(1e-2)

def step(p, state, x, y):
    value, grads = jax.value_and_grad(loss)(p, x, y)
    updates, state = opt.update(grads, state, p)
    return optax.apply_updates(p, updates), state, value, grads

state = opt.init(params)
compiled = jax.jit(step).lower(params, state, x, y).compile()
baseline = rss_anon()
if run:
    params, state, value, grads = compiled(params, state, x, y)
    np.savez(f"{data}/trained.npz", **{k: np.asarray(v) for k, v in params.items()})
    np.savez(f"{data}/grads.npz", **{k: np.asarray(v) for k, v in grads.items()})
    print(json.dumps({"loss": float(value), "stats": jask.memory_stats()}))
else:
    print(json.dumps({"baseline": baseline}))
"""
)


def _numpy_mlp_step(folder, chunk=1 << 17):
    """The loss and gradients of the same MLP in float64 NumPy, streaming x and y in chunks."""
    x = np.load(folder / "x.npy", mmap_mode="r")
    y = np.load(folder / "y.npy", mmap_mode="r")
    p = {k: np.load(folder / f"{k}.npy").astype(np.float64) for k in ("w1", "b1", "w2", "b2")}
    g = {k: np.zeros_like(v) for k, v in p.items()}
    total = 0.0
    for s in range(0, x.shape[0], chunk):
        xb = np.asarray(x[s : s + chunk], np.float64)
        yb = np.asarray(y[s : s + chunk], np.float64)
        pre = xb @ p["w1"] + p["b1"]
        h = np.maximum(pre, 0)
        r = h @ p["w2"] + p["b2"] - yb
        total += float(np.sum(r * r))
        dr = 2 * r / y.size
        g["w2"] += h.T @ dr
        g["b2"] += dr.sum(axis=0)
        dh = (dr @ p["w2"].T) * (pre > 0)
        g["w1"] += xb.T @ dh
        g["b1"] += dh.sum(axis=0)
    return total / y.size, g


def test_jitted_mlp_and_adam_step_under_a_cap_of_budget_baseline_and_constant(disk_folder):
    """The issue's failing case: a jitted MLP loss, gradient and adam step over data four times
    the cap, in a child capped at its budget + its compiled baseline + RUNTIME_CONSTANT."""
    data = disk_folder / "mlp"
    data.mkdir()
    rng = np.random.default_rng(3)
    np.save(data / "w1.npy", (rng.standard_normal((FEATURES, HIDDEN)) / 16).astype(np.float32))
    np.save(data / "b1.npy", np.zeros(HIDDEN, np.float32))
    np.save(data / "w2.npy", (rng.standard_normal((HIDDEN, 1)) / 11).astype(np.float32))
    np.save(data / "b2.npy", np.zeros(1, np.float32))
    np.save(data / "x.npy", np.zeros((8, FEATURES), np.float32))  # for the baseline only
    np.save(data / "y.npy", np.zeros((8, 1), np.float32))
    argv = [sys.executable, "-c", MLP_CHILD, str(data), str(data / "scratch"), str(CAPPED_BUDGET)]
    dry = subprocess.run([*argv, "compile"], capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    baseline = json.loads(dry.stdout.splitlines()[-1])["baseline"]
    cap = CAPPED_BUDGET + baseline + RUNTIME_CONSTANT
    rows = -(-4 * cap // ((FEATURES + 1) * 4))  # x and y total four times the cap
    _write_uniform(data / "x.npy", (rows, FEATURES), rng)
    _write_uniform(data / "y.npy", (rows, 1), rng)
    with capped_cgroup(cap) as cgroup:
        child = _run_capped(cgroup, [*argv, "run"])
        oom_kills = cgroup.oom_kills()
    assert child.returncode == 0, f"exit {child.returncode}, OOM kills {oom_kills}\n{child.stderr}"
    assert oom_kills == 0
    report = json.loads(child.stdout.splitlines()[-1])
    loss, want = _numpy_mlp_step(data)
    assert report["loss"] == pytest.approx(loss, rel=1e-4)
    grads, trained = np.load(data / "grads.npz"), np.load(data / "trained.npz")
    for k, g in want.items():
        np.testing.assert_allclose(grads[k], g, rtol=1e-3, atol=1e-4 * np.abs(g).max())
        # adam's first step from these gradients: -lr * g / (|g| + eps), bias corrections cancel
        got = np.asarray(grads[k], np.float64)
        start = np.load(data / f"{k}.npy").astype(np.float64)
        np.testing.assert_allclose(
            trained[k], start - 1e-2 * got / (np.abs(got) + 1e-8), rtol=1e-5, atol=1e-6
        )
    assert report["stats"]["blocks_peak"] <= CAPPED_BUDGET
