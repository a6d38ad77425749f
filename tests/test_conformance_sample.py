"""A fixed sample of JAX's own tests run with DiskArrays (tests/conformance/: `make conformance`
runs them all and reports per file).

The sample (tests/conformance/sample.txt, test ids drawn from every file of the full run) runs
in one child process through tests/conformance/run.py at a small memory budget: each test first
as JAX wrote it on jax.Arrays, then with DiskArrays given to the function under test and its
results compared with NumPy's reference and with the same function on jax.Arrays (values,
dtypes, shapes). Each test here asserts that JAX's test passed on jax.Arrays, received a
DiskArray and passed with DiskArrays. A test listed in tests/conformance/exceptions.txt is
xfail(strict=True) with the listed reason, so a fix makes it pass and fails here until its line
is removed from the list.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE / "conformance"
sys.path.insert(0, str(CONFORMANCE))
import run as conformance  # noqa: E402

sys.path.remove(str(CONFORMANCE))

BUDGET = "64KB"
SAMPLE = [line for line in (CONFORMANCE / "sample.txt").read_text().split() if line]
EXCEPTIONS = conformance.load_exceptions()


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """The records of the sample's tests this session runs (make test runs some of them: one
    child process for those only)."""
    out = tmp_path_factory.mktemp("conformance")
    chosen = [
        item.callspec.params["test_id"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    ]
    ids = tmp_path_factory.mktemp("conformance_ids") / "ids.txt"
    ids.write_text("\n".join(chosen or SAMPLE) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_GENERATED_CASES"}
    cmd = [sys.executable, str(CONFORMANCE / "run.py"), "--ids-file", str(ids)]
    cmd += ["--budgets", BUDGET, "--workers", "1", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((out / "conformance.json").read_text())


def _param(test_id):
    entry = conformance.listed(test_id, EXCEPTIONS)
    if entry is None:
        return pytest.param(test_id, id=test_id)
    kind, _, reason = entry
    return pytest.param(
        test_id, id=test_id, marks=pytest.mark.xfail(strict=True, reason=f"{kind}: {reason}")
    )


@pytest.mark.parametrize("test_id", [_param(t) for t in SAMPLE])
def test_jax_test_with_diskarrays(results, test_id):
    rec = results.get(test_id)
    assert rec is not None, f"{test_id} did not run (its id changed with JAX's sampling?)"
    assert rec["baseline"] == "passed", rec
    assert rec["received"], "the test no longer gives a DiskArray to the function under test"
    assert rec[f"disk@{BUDGET}"] == "passed", rec.get(f"error@{BUDGET}")


# The plugin itself: a JAX-style test whose function gives another value or dtype on DiskArrays
# than on jax.Arrays fails even where NumPy's reference cannot tell (the tolerance is wide, the
# dtype is not checked against NumPy), and an honest one passes.
PLUGIN_CASES = """
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from jax._src import test_util as jtu

import jask


def sneaky(x):
    return x + 1e-3 if isinstance(x, jask.DiskArray) else x


def widening(x):
    return x.astype(jnp.int32) if isinstance(x, jask.DiskArray) else x


class Cases(jtu.JaxTestCase):
    def _args(self):
        return [np.arange(6, dtype=np.float32).reshape(2, 3)]

    def testHonest(self):
        self._CheckAgainstNumpy(np.negative, jnp.negative, self._args)
        self._CompileAndCheck(jnp.negative, self._args)

    def testValueAgainstNumpy(self):
        self._CheckAgainstNumpy(lambda x: x, sneaky, self._args, tol=1e-2)

    def testValueCompiled(self):
        self._CompileAndCheck(sneaky, self._args)

    def testDtype(self):
        self._CheckAgainstNumpy(lambda x: x, widening, self._args, check_dtypes=False)
"""


def test_plugin_compares_with_jax_arrays(tmp_path):
    (tmp_path / "cases_test.py").write_text(PLUGIN_CASES)
    env = dict(os.environ, JASK_CONFORMANCE_OUT=str(tmp_path), PYTHONPATH=str(CONFORMANCE))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(CONFORMANCE / "pytest.ini"),
        "-p",
        "plugin",
        "-q",
    ]
    cmd += ["--rootdir", str(tmp_path), str(tmp_path / "cases_test.py")]
    subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    records = {}
    for line in (tmp_path / "main.jsonl").read_text().splitlines():
        rec = json.loads(line)
        records.setdefault(rec.pop("id").split("::")[-1], {}).update(rec)
    assert {k: (r["baseline"], r["received"], r["disk"]) for k, r in records.items()} == {
        "testHonest": ("passed", True, "passed"),
        "testValueAgainstNumpy": ("passed", True, "failed"),
        "testValueCompiled": ("passed", True, "failed"),
        "testDtype": ("passed", True, "failed"),
    }
    assert "jax.Array run" in records["testValueAgainstNumpy"]["error"]
    assert "dtype differs from the jax.Array run" in records["testDtype"]["error"]
