"""example.py prints exactly the seed pipeline's losses and confirms the gradients."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXPECTED = """\
step 0: loss = 80.9999
step 1: loss = 77.2756
step 2: loss = 73.7257
step 3: loss = 70.3418
step 4: loss = 67.1164
gradients of a, b and c agree with NumPy's hand-derived ones: True
"""


def test_example_output(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "example.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == EXPECTED
