"""Zero materialization: a Jask program never holds a whole array in memory.

Two views of one promise, each with a control that shows the check can fail:
- the lowered (and compiled) program of a jitted gradient has no tensor larger
  than the memory budget, while `jask.materialize` in the same check is flagged;
- a real run under a hard cgroup memory cap, on data four times the cap, gives
  NumPy's loss and gradients, while a child that allocates past the cap is killed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import jask
from bench.cgroup import CgroupUnavailable, create_memory_cgroup

MiB = 1 << 20


def mse_loss(a, b, c, t):
    return jask.sum(jask.square(jask.sub(jask.dot(jask.dot(a, b), c), t)))


value_and_grads = jax.value_and_grad(mse_loss, argnums=(0, 1, 2))


# -- the lowered program ------------------------------------------------------

# A ranked tensor type: `tensor<` dims (each `N` or `?`, then `x`), the element type.
_TENSOR_TYPE = re.compile(r"tensor<((?:(?:\d+|\?)x)*)(complex<\w+>|\w+)")


def element_bytes(element: str) -> int:
    """Bytes of one element of an MLIR element type such as f32, bf16, i1, index, complex<f64>."""
    if element == "index":
        return 8
    complex_of = re.fullmatch(r"complex<(\w+)>", element)
    if complex_of:
        return 2 * element_bytes(complex_of.group(1))
    scalar = re.fullmatch(r"(?:[su]?i|bf|f)(\d+)(?:E\w*)?", element)
    if scalar is None:
        raise ValueError(f"unknown MLIR element type {element!r}")
    return math.ceil(int(scalar.group(1)) / 8)


def tensor_types(mlir: str) -> list[tuple[str, float]]:
    """Every tensor type written in `mlir`, with its size in bytes (inf for a dynamic dim)."""
    found = []
    for match in _TENSOR_TYPE.finditer(mlir):
        dims = match.group(1).split("x")[:-1]
        size = math.prod(math.inf if d == "?" else int(d) for d in dims)
        found.append((match.group(0) + ">", size * element_bytes(match.group(2))))
    # Every `tensor<` must have parsed, or a big tensor could hide in an unread type.
    assert len(found) == mlir.count("tensor<"), "some tensor types were not parsed"
    return found


def over_budget(mlir: str, budget: int) -> list[tuple[str, float]]:
    return [(ty, size) for ty, size in tensor_types(mlir) if size > budget]


@pytest.mark.parametrize(
    "ty, size",
    [
        ("tensor<i32>", 4),
        ("tensor<4x3xf32>", 48),
        ("tensor<0xindex>", 0),
        ("tensor<2xi64>", 16),
        ("tensor<8xi1>", 8),
        ("tensor<2x2xbf16>", 8),
        ("tensor<3xf8E4M3FN>", 3),
        ("tensor<2xcomplex<f64>>", 32),
        ("tensor<?x4xf32>", math.inf),
    ],
)
def test_tensor_types_reads_sizes(ty, size):
    assert tensor_types(f"(%arg0: {ty}) -> {ty}") == [(ty, size)] * 2


LOWERING_BUDGET = 4 * MiB


def _inputs_far_over_budget():
    """a (N, 16), b (16, 16), c (16, 4), t (N, 4): 80 MiB of float32, 20 times the budget."""
    rows = 1 << 20
    rng = np.random.default_rng(0)
    a = jask.zeros((rows, 16))  # sparse files: nothing is written
    t = jask.zeros((rows, 4))
    b = jask.DiskArray.from_numpy(rng.standard_normal((16, 16), dtype=np.float32))
    c = jask.DiskArray.from_numpy(rng.standard_normal((16, 4), dtype=np.float32))
    assert a.nbytes + b.nbytes + c.nbytes + t.nbytes >= 16 * LOWERING_BUDGET
    return a, b, c, t


def test_lowered_gradient_has_no_tensor_over_budget(small_budget):
    small_budget(LOWERING_BUDGET)
    lowered = jax.jit(value_and_grads).lower(*_inputs_far_over_budget())
    mlir = lowered.as_text()
    assert "custom_call @jask_" in mlir
    assert over_budget(mlir, LOWERING_BUDGET) == []
    stats = lowered.compile().memory_analysis()
    xla_bytes = stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
    assert xla_bytes <= LOWERING_BUDGET


def test_tensor_check_flags_materialize(small_budget):
    # The explicit bridge makes a full-size tensor: the same checks must catch it.
    small_budget(LOWERING_BUDGET)
    a, b, c, t = _inputs_far_over_budget()

    def materializing_loss(a, b, c, t):
        residual = jask.sub(jask.dot(jask.dot(a, b), c), t)
        return jax.numpy.sum(jask.materialize(jask.square(residual)))

    lowered = jax.jit(jax.value_and_grad(materializing_loss, argnums=(0, 1, 2))).lower(a, b, c, t)
    flagged = over_budget(lowered.as_text(), LOWERING_BUDGET)
    assert flagged and set(flagged) == {("tensor<1048576x4xf32>", t.nbytes)}
    assert lowered.compile().memory_analysis().temp_size_in_bytes >= t.nbytes


# -- a run under a hard memory cap -----------------------------------------------

CAP = 192 * MiB  # JAX's import alone takes about 60 MiB of anonymous memory
BUDGET = 32 * MiB  # Jask's buffers inside the capped child
ROW_BYTES = (16 + 4) * 4  # one row of a and of t, float32
ROWS = -(-4 * CAP // ROW_BYTES)  # the inputs total at least four times the cap
CHUNK_ROWS = 1 << 20  # rows per chunk when writing the inputs
REFERENCE_ROWS = 1 << 18  # rows per chunk of the NumPy reference

# Runs in the capped child: the seed pipeline on the files in argv[1], grads
# saved next to them; prints JSON. A thread samples the anonymous memory
# (RssAnon) so the parent can see what Jask itself held.
# The capped children's measure of what they hold: anonymous memory (RssAnon), in bytes.
RSS_ANON = r"""
def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
"""

CHILD = (
    r"""
import json, sys, threading, time
"""
    + RSS_ANON
    + r"""

peak = [0]
def sample():
    while True:
        peak[0] = max(peak[0], rss_anon())
        time.sleep(0.01)
threading.Thread(target=sample, daemon=True).start()

import jax, jask, numpy as np
data, scratch, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
inputs = sys.argv[4] if len(sys.argv) > 4 else "npy"
jask.set_memory_budget(budget, scratch_dir=scratch)
argnums, prefix = (0, 1, 2), ""
if inputs.endswith(".safetensors"):  # the same inputs as the tensors of one safetensors file
    npy = {name: jask.DiskArray.open(f"{data}/{name}.npy") for name in "abct"}
    jask.save_safetensors(inputs, npy)  # streamed by the engine, under the cap
    del npy
    tensors = jask.open_safetensors(inputs)
    a, b, c, t = (tensors[name] for name in "abct")
    argnums, prefix = (1, 2), "st_"  # grads of b, c (a's would be another 640 MB to write)
elif inputs == "zarr":
    a, b, c, t = (jask.open_zarr(f"{data}/{name}.zarr") for name in "abct")
else:
    a, b, c, t = (jask.DiskArray.open(f"{data}/{name}.npy") for name in "abct")

def mse_loss(a, b, c, t):
    return jask.sum(jask.square(jask.sub(jask.dot(jask.dot(a, b), c), t)))

compiled = jax.jit(jax.value_and_grad(mse_loss, argnums=argnums)).lower(a, b, c, t).compile()
before = rss_anon()
peak[0] = before
start = time.perf_counter()
loss, grads = compiled(a, b, c, t)
loss = float(loss)
seconds = time.perf_counter() - start
after = rss_anon()
report = {"loss": loss, "anon_before": before, "anon_peak": max(peak[0], after),
          "anon_after": after, "seconds": seconds}
for name, grad in zip(("abc"[i] for i in argnums), grads):
    if name == "a" and inputs == "zarr":  # its column sums and sums of squares, not a copy
        report["grad_a_sums"] = np.asarray(jask.sum(grad, axis=0)).tolist()
        report["grad_a_squares"] = np.asarray(jask.sum(jask.square(grad), axis=0)).tolist()
    else:
        grad.save(f"{data}/{prefix}grad_{name}.npy")
print(json.dumps(report))
"""
)

# Allocates (and touches) twice the cap: the kernel must kill it.
GREEDY_CHILD = "import sys, numpy as np; np.ones(2 * int(sys.argv[1]), np.uint8); print('survived')"


def _disk_folder(tmp_path_factory) -> Path:
    """A new folder on a real disk: on a tmpfs the "disk" arrays would sit in memory."""
    for base in (
        tmp_path_factory.getbasetemp(),
        Path("/var/tmp"),
        Path(__file__).resolve().parents[1] / "build",
    ):
        if base.is_dir() and _fs_type(base) not in ("tmpfs", "ramfs"):
            return Path(tempfile.mkdtemp(prefix="jask-capped-", dir=base))
    pytest.skip("no disk-backed folder for the capped run's files (pytest's tmp, /var/tmp, build/)")


def _fs_type(folder: Path) -> str:
    out = subprocess.run(["stat", "-f", "-c", "%T", str(folder)], capture_output=True, text=True)
    return out.stdout.strip()


def _write_uniform(path: Path, shape: tuple[int, int], rng) -> None:
    """A float32 .npy of values in [-1, 1), written chunk by chunk."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
    for start in range(0, shape[0], CHUNK_ROWS):
        block = rng.random((min(CHUNK_ROWS, shape[0] - start), shape[1]), dtype=np.float32)
        out[start : start + len(block)] = block * 2 - 1
    out.flush()
    del out


def _run_capped(cgroup, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cgroup.command(argv), capture_output=True, text=True, timeout=300)


@contextlib.contextmanager
def capped_cgroup(cap: int = CAP):
    """A fresh cgroup capped at `cap` bytes, removed afterwards; skips where none can be made."""
    try:
        cgroup = create_memory_cgroup(cap)
    except CgroupUnavailable as e:
        pytest.skip(str(e))
    try:
        yield cgroup
    finally:
        cgroup.remove()


@pytest.fixture(scope="module")
def disk_folder(tmp_path_factory):
    folder = _disk_folder(tmp_path_factory)
    yield folder
    shutil.rmtree(folder)  # gigabytes: not left to pytest's keep-three-runs rotation


@pytest.fixture(scope="module")
def capped_run(disk_folder):
    """The seed pipeline run once in a child capped at CAP: its report and the cgroup's numbers."""
    data = disk_folder
    with capped_cgroup() as cgroup:
        rng = np.random.default_rng(1)
        _write_uniform(data / "a.npy", (ROWS, 16), rng)
        _write_uniform(data / "t.npy", (ROWS, 4), rng)
        np.save(data / "b.npy", (rng.standard_normal((16, 16)) / 4).astype(np.float32))
        np.save(data / "c.npy", (rng.standard_normal((16, 4)) / 4).astype(np.float32))
        start = time.perf_counter()
        child = _run_capped(
            cgroup, [sys.executable, "-c", CHILD, str(data), str(data / "scratch"), str(BUDGET)]
        )
        seconds = time.perf_counter() - start
        peak, oom_kills = cgroup.peak_bytes(), cgroup.oom_kills()
    assert child.returncode == 0, (
        f"the capped child exited with {child.returncode} (OOM kills: "
        f"{oom_kills})\n{child.stderr[-4000:]}"
    )
    report = json.loads(child.stdout.splitlines()[-1])
    report.update(
        folder=data,
        cgroup_peak=peak,
        oom_kills=oom_kills,
        cgroup_version=cgroup.version,
        child_seconds=seconds,
    )
    return report


def test_memory_cap_kills_a_child_over_it():
    with capped_cgroup() as cgroup:
        child = _run_capped(cgroup, [sys.executable, "-c", GREEDY_CHILD, str(CAP)])
        oom_kills = cgroup.oom_kills()
    assert "survived" not in child.stdout
    assert child.returncode == -signal.SIGKILL
    assert oom_kills == 1


def test_capped_run_stays_under_cap(capped_run):
    inputs = sum((capped_run["folder"] / f"{name}.npy").stat().st_size for name in "abct")
    assert inputs >= 4 * CAP
    assert capped_run["oom_kills"] == 0
    assert capped_run["anon_peak"] < CAP
    if capped_run["cgroup_peak"] is not None:
        assert capped_run["cgroup_peak"] <= CAP


def _assert_rows_close(got, want, first_row: int, rtol=1e-4, atol=1e-5) -> None:
    bad = ~(np.abs(got - want) <= atol + rtol * np.abs(want))
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise AssertionError(
            f"{bad.sum()} elements differ from NumPy; first at "
            f"[{first_row + row}, {col}]: {got[row, col]} != {want[row, col]}"
        )


def test_capped_run_matches_numpy(capped_run):
    folder = capped_run["folder"]
    a, t, grad_a = (np.load(folder / f"{name}.npy", mmap_mode="r") for name in ("a", "t", "grad_a"))
    b, c = (np.load(folder / f"{name}.npy").astype(np.float64) for name in "bc")
    assert grad_a.shape == a.shape and grad_a.dtype == np.float32
    # With r = a b c - t: loss = sum(r**2), dL/da = 2 r (b c)^T, dL/db = 2 a^T r c^T,
    # dL/dc = 2 b^T a^T r; so a^T r, summed over chunks, gives the last two.
    bc = b @ c
    loss, a_t_r = 0.0, np.zeros((16, 4))
    for start in range(0, len(a), REFERENCE_ROWS):
        rows = slice(start, start + REFERENCE_ROWS)
        a_rows = np.asarray(a[rows], np.float64)
        r = a_rows @ bc - t[rows]
        loss += float(np.sum(r * r))
        a_t_r += a_rows.T @ r
        _assert_rows_close(grad_a[rows], r @ (2 * bc.T), start)
    np.testing.assert_allclose(capped_run["loss"], loss, rtol=1e-4)
    for name, want in (("b", 2 * a_t_r @ c.T), ("c", 2 * b.T @ a_t_r)):
        got = np.load(folder / f"grad_{name}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_capped_run_holds_no_more_than_the_budget(capped_run):
    # After compiling, everything the run allocates is Jask's blocks and XLA's
    # small buffers: the anonymous memory may grow by the budget and a little more.
    slack = 32 * MiB
    growth = capped_run["anon_peak"] - capped_run["anon_before"]
    retained = capped_run["anon_after"] - capped_run["anon_before"]
    assert growth <= BUDGET + slack, (
        f"anonymous memory grew by {growth / MiB:.0f} MiB during the run (budget "
        f"{BUDGET / MiB:.0f} MiB) and {retained / MiB:.0f} MiB stayed after it"
    )


def test_capped_run_on_a_safetensors_file_matches_the_npy_run(capped_run):
    """The seed pipeline's loss and the gradients of b and c (not a's: another 640 MB to write),
    its inputs the tensors of one safetensors file four times the cap, which the capped child
    writes from the .npy inputs (save_safetensors streams DiskArrays) and opens."""
    folder = capped_run["folder"]
    path = folder / "seed.safetensors"
    try:
        with capped_cgroup() as cgroup:
            child = _run_capped(
                cgroup,
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(folder),
                    str(folder / "scratch"),
                    str(BUDGET),
                    str(path),
                ],
            )
            peak, oom_kills = cgroup.peak_bytes(), cgroup.oom_kills()
        assert child.returncode == 0, (
            f"exit {child.returncode}, OOM kills {oom_kills}\n{child.stderr[-4000:]}"
        )
        assert path.stat().st_size >= 4 * CAP
    finally:
        path.unlink(missing_ok=True)
    report = json.loads(child.stdout.splitlines()[-1])
    assert oom_kills == 0 and report["anon_peak"] < CAP
    assert peak is None or peak <= CAP
    # The .npy run's loss and gradients are checked against NumPy (test_capped_run_matches_numpy).
    np.testing.assert_allclose(report["loss"], capped_run["loss"], rtol=1e-6)
    for name in "bc":
        got, want = (np.load(folder / f"{p}grad_{name}.npy") for p in ("st_", ""))
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


# The seed pipeline on zarr (zstd) inputs: each is one chunk of random rows repeated down to ROWS
# rows, so the inputs are as large as the .npy ones when decoded (four times the cap) while
# writing them and computing NumPy's reference take one chunk's time.
ZARR_CHUNK_ROWS = 1 << 16  # chunks of 4 MiB (a) and 1 MiB (t)


def _periodic_zarr(path: Path, block: np.ndarray, rows: int) -> None:
    """A zarr v3 (zstd) array of `rows` rows repeating `block`: to_zarr writes its first chunk,
    every other chunk file is a hard link to that one."""
    jask.DiskArray.from_numpy(block).to_zarr(path, chunks=block.shape, codec="zstd", level=1)
    meta = json.loads((path / "zarr.json").read_text())
    meta["shape"][0] = rows
    (path / "zarr.json").write_text(json.dumps(meta))
    first = path / "c" / "0" / "0"
    for i in range(1, -(-rows // len(block))):
        (path / "c" / str(i)).mkdir()
        os.link(first, path / "c" / str(i) / "0")


@pytest.fixture(scope="module")
def capped_zarr_run(disk_folder):
    """The seed pipeline run in a child capped at CAP on zarr inputs; its report and the blocks."""
    data = disk_folder / "zarr"
    data.mkdir()
    rng = np.random.default_rng(2)
    blocks = {
        "a": rng.random((ZARR_CHUNK_ROWS, 16), dtype=np.float32) * 2 - 1,
        "t": rng.random((ZARR_CHUNK_ROWS, 4), dtype=np.float32) * 2 - 1,
        "b": (rng.standard_normal((16, 16)) / 4).astype(np.float32),
        "c": (rng.standard_normal((16, 4)) / 4).astype(np.float32),
    }
    for name, block in blocks.items():
        _periodic_zarr(data / f"{name}.zarr", block, ROWS if name in "at" else len(block))
    with capped_cgroup() as cgroup:
        child = _run_capped(
            cgroup,
            [sys.executable, "-c", CHILD, str(data), str(data / "scratch"), str(BUDGET), "zarr"],
        )
        oom_kills = cgroup.oom_kills()
    assert child.returncode == 0, (
        f"the capped child on zarr inputs exited with {child.returncode} (OOM kills: "
        f"{oom_kills})\n{child.stderr[-4000:]}"
    )
    report = json.loads(child.stdout.splitlines()[-1])
    report.update(folder=data, oom_kills=oom_kills, blocks=blocks)
    return report


def test_capped_run_on_zarr_inputs_matches_numpy(capped_zarr_run):
    assert capped_zarr_run["oom_kills"] == 0
    assert capped_zarr_run["anon_peak"] < CAP
    a, t, b, c = (capped_zarr_run["blocks"][n].astype(np.float64) for n in "atbc")
    # ROWS rows = `repeats` whole blocks, then the first `rest` rows of one more.
    repeats, rest = divmod(ROWS, ZARR_CHUNK_ROWS)
    bc = b @ c
    r = a @ bc - t
    loss = repeats * np.sum(r * r) + np.sum(r[:rest] ** 2)
    a_t_r = repeats * (a.T @ r) + a[:rest].T @ r[:rest]
    np.testing.assert_allclose(capped_zarr_run["loss"], loss, rtol=1e-4)
    for name, want in (("b", 2 * a_t_r @ c.T), ("c", 2 * b.T @ a_t_r)):
        got = np.load(capped_zarr_run["folder"] / f"grad_{name}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # dL/da = 2 r (b c)^T, row by row: its column sums and sums of squares, block by block.
    grad_block = r @ (2 * bc.T)
    # float32 sums of ROWS terms: an error floor of about 1e-5 of the sum of their magnitudes
    # (one chunk read wrong moves the sums of squares by 1/150, far beyond it).
    for key, f in (("grad_a_sums", lambda g: g), ("grad_a_squares", np.square)):
        want = repeats * f(grad_block).sum(axis=0) + f(grad_block[:rest]).sum(axis=0)
        floor = 1e-5 * (repeats + 1) * np.abs(f(grad_block)).sum(axis=0)
        np.testing.assert_allclose(capped_zarr_run[key], want, rtol=1e-4, atol=floor.max())
