"""The benchmark harness end to end on a few MB: `python -m bench` as `make bench` runs it, much smaller."""

import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRED = (
    "workload",
    "contender",
    "seconds",
    "throughput",
    "unit",
    "limit_fraction",
    "peak_rss_bytes",
    "read_bytes",
    "written_bytes",
    "data_bytes",
    "budget_bytes",
)


def run_bench(tmp_path, *args):
    """`python -m bench` at 0.004 GiB and a 1 MB budget; its records and its markdown."""
    out, markdown = tmp_path / "results.json", tmp_path / "BENCHMARKS.md"
    subprocess.run(
        [sys.executable, "-m", "bench", "--size-gib", "0.004", "--budget", "1MB", *args]
        + ["--data", str(tmp_path / "data"), "--out", str(out), "--markdown", str(markdown)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return json.loads(out.read_text()), markdown.read_text()


def test_bench_runs_and_writes_sane_records(tmp_path):
    records, markdown = run_bench(tmp_path, "--workloads", "W1,W2", "--contenders", "jask,numpy")
    assert [(r["workload"], r["contender"]) for r in records] == [
        ("W1", "jask"),
        ("W1", "numpy"),
        ("W2", "jask"),
        ("W2", "numpy"),
    ]
    for r in records:
        assert all(key in r for key in REQUIRED), r
        assert r["error"] is None, r["error"]
        assert r["unit"] == "GB/s" and r["budget_bytes"] == 1 << 20
        assert 0 < r["seconds"] < 60 and r["throughput"] > 0 and r["limit_fraction"] > 0
        assert r["peak_rss_bytes"] >= r["baseline_rss_bytes"] > 0
        assert (
            r["read_bytes"] >= 0.9 * r["minimal_read_bytes"] > 0
        )  # evicted inputs come from the disk
        assert r["written_bytes"] >= 0.9 * r["minimal_written_bytes"]
        assert r["data_bytes"] == r["minimal_read_bytes"] + r["minimal_written_bytes"]
        assert r["check_rel_diff"] < 1e-2
    assert "| W2 |" in markdown


def test_bench_format_workloads_read_safetensors_and_zarr(tmp_path):
    """W1s and W1z: W1 over a safetensors file and a zstd Zarr group derived from W1's files."""
    records, markdown = run_bench(
        tmp_path,
        "--repeat",
        "1",
        "--workloads",
        "W1s,W1z",
        "--contenders",
        "jask,numpy,zarr",  # not dask: the [test] extra does not install it
    )
    assert [(r["workload"], r["contender"]) for r in records] == [
        ("W1s", "jask"),
        ("W1s", "numpy"),
        ("W1z", "jask"),
        ("W1z", "zarr"),
    ]
    data = tmp_path / "data"
    stored = {
        "W1s": sum(f.stat().st_size for f in data.glob("w1-*.safetensors")),
        "W1z": sum(f.stat().st_size for f in data.glob("w1-*.zarr/**/*") if f.is_file()),
    }
    x_bytes = 4194 * 256 * 4  # x and y of 0.004 GiB: (4194, 256) float32
    assert stored["W1s"] > 2 * x_bytes > stored["W1z"] > 0  # a header; compressed chunks
    for r in records:
        assert r["error"] is None, r["error"]
        assert r["minimal_read_bytes"] == stored[r["workload"]]
        assert r["read_bytes"] >= 0.9 * r["minimal_read_bytes"]  # evicted inputs come from the disk
        assert r["throughput"] > 0 and r["limit_fraction"] > 0
        assert r["check_rel_diff"] < 1e-2
    for r in records[2:]:
        assert r["decoded_bytes"] == 2 * x_bytes and r["decode_bps"] > 0
        assert 1 < r["stored_ratio"] < 2
    reference = float(
        np.sum(
            np.square(
                np.load(data / "x-4194x256.npy").astype(np.float64)
                - np.load(data / "y-4194x256.npy")
            )
        )
    )
    np.testing.assert_allclose([r["check"][0] for r in records], reference, rtol=1e-3)
    assert "| One core decodes |" in markdown  # the decode table
