"""examples/train_regression.py trains to the closed-form solution on a data set larger than the budget."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_example(name, cwd, *args):
    """examples/<name> in a child process (cwd `cwd`); fails the test with its output if it fails."""
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_train_regression_converges(tmp_path):
    out = run_example(
        "train_regression.py",
        tmp_path,
        *("--rows", "60000", "--features", "16", "--budget", "256KB", "--epochs", "3"),
        *("--batch-size", "512", "--data-dir", str(tmp_path)),
    )
    assert "epoch 2: loss =" in out.stdout
    assert "matches the closed-form solution" in out.stdout
    data_line = next(line for line in out.stdout.splitlines() if line.startswith("data:"))
    data_bytes = int(data_line.split()[1].replace(",", ""))
    assert data_bytes > 256 * 1024  # the data set is larger than the budget
