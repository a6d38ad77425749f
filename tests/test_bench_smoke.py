"""The benchmark harness end to end on a few MB: `python -m bench` as `make bench` runs it, much smaller."""

import json
import os
import subprocess
import sys

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


def test_bench_runs_and_writes_sane_records(tmp_path):
    out, markdown = tmp_path / "results.json", tmp_path / "BENCHMARKS.md"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--size-gib",
            "0.004",
            "--budget",
            "1MB",
            "--workloads",
            "W1,W2",
            "--contenders",
            "jask,numpy",
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(out),
            "--markdown",
            str(markdown),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    records = json.loads(out.read_text())
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
    assert "| W2 |" in markdown.read_text()
