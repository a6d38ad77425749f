"""pytest plugin that runs JAX's own test files (tests/conformance/jax_tests/, unchanged) with
DiskArrays given to the function under test.

JAX's test helpers are where a test hands arrays to the function under test; the plugin replaces
them (`jtu.JaxTestCase._CheckAgainstNumpy`, `_CompileAndCheck`, `check_grads` and the vmap tests'
`_CheckBatching`). While a test runs "on disk", each helper:

* makes the test's arrays once (its `args_maker`, or the arrays it is given) and writes every
  array among them that Jask can store to a DiskArray (`jask.DiskArray.from_numpy`);
* runs the function under test on the DiskArrays and on the plain arrays (jax.Arrays), and the
  reference (NumPy, finite differences, per-example loops) on the plain arrays only;
* asserts what JAX's helper asserts, on the DiskArray run, with the test's tolerances, and that
  the DiskArray run's results have the jax.Array run's tree, shapes and dtypes exactly and its
  values within the same tolerances (so a result Jask agrees with itself on but JAX does not
  fails, which JAX's `_CompileAndCheck` alone, comparing Jask with Jask, would not see).

Each test first runs as JAX wrote it (the baseline, with plain arrays, as `unittest` runs it),
then on disk (as pytest runs it: its outcome is the test's outcome). Each worker appends one JSON
line per test and phase to `$JASK_CONFORMANCE_OUT/<worker>.jsonl`: the baseline's outcome, then
whether the test received a DiskArray and the disk run's outcome and error. run.py merges them.

Environment: JASK_CONFORMANCE_OUT (folder for the records), JASK_CONFORMANCE_BUDGET (memory
budget, default 64MB), JASK_CONFORMANCE_BASELINE (1: run the baseline too; 0: the disk run only),
JASK_CONFORMANCE_TIMEOUT (seconds per test and phase, default 120).
"""

import json
import os
import shutil
import signal
import tempfile
import time
import traceback
import unittest

import jax
import jax.test_util
import numpy as np
import pytest
from jax._src import public_test_util
from jax._src import test_util as jtu

import jask

_STATE = {"disk": False, "received": False, "candidate": False}
_STORABLE = {}
_VMAP = jax.vmap
_ORIGINAL = {
    "check_against_numpy": jtu.JaxTestCase._CheckAgainstNumpy,
    "compile_and_check": jtu.JaxTestCase._CompileAndCheck,
    "check_grads": public_test_util.check_grads,
}
_SCRATCH = []


# ---------------------------------------------------------------------------------------------
# DiskArrays for the function under test


def _to_disk(x):
    """A DiskArray holding x when x is an array Jask stores (any shape, 0-d too), else x."""
    if isinstance(x, jask.DiskArray) or not isinstance(x, np.ndarray | jax.Array):
        return x
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
        return x  # PRNG keys
    try:
        d = jask.DiskArray.from_numpy(np.asarray(x))
    except TypeError:  # a dtype Jask does not store (complex, int4, float8, ...)
        return x
    _STATE["received"] = True
    return d


def to_disk(tree):
    return jax.tree.map(_to_disk, tree)


def to_jax(tree):
    """The jax.Arrays of the arrays to_disk writes (jnp.asarray: the dtype a DiskArray of them
    has, float32 for float64 data with x64 off), for the run Jask is compared with: a NumPy
    argument may reach a result unconverted in JAX (while_loop forwards a carry the body
    returns unchanged), which a jax.Array argument does not."""

    def convert(x):
        if isinstance(x, np.ndarray) and _storable(x):
            # np.asarray first, as to_disk: a masked array's data (jnp.asarray refuses one)
            return jax.numpy.asarray(np.asarray(x))
        return x

    return jax.tree.map(convert, tree)


def _storable(x):
    if not isinstance(x, np.ndarray | jax.Array) or jax.dtypes.issubdtype(
        x.dtype, jax.dtypes.extended
    ):
        return False
    if x.dtype not in _STORABLE:
        try:
            jask.DiskArray.from_numpy(np.zeros(1, x.dtype))
            _STORABLE[x.dtype] = True
        except TypeError:
            _STORABLE[x.dtype] = False
    return _STORABLE[x.dtype]


def note_candidate(tree):
    """In the baseline: whether the helper got an array Jask would store (then the test runs on
    disk too; a test whose helpers never see one is not run again)."""
    if any(_storable(x) for x in jax.tree.leaves(tree)):
        _STATE["candidate"] = True


# Jask against JAX on the same function: tighter than a test's tolerance against NumPy (which
# allows for another algorithm), looser than exact (Jask's blocks reorder sums).
_JAX_TOL = {
    np.dtype(np.float16): 1e-2, np.dtype(jax.numpy.bfloat16): 5e-2, np.dtype(np.float32): 1e-5,
    np.dtype(np.float64): 1e-12, np.dtype(np.complex64): 1e-5, np.dtype(np.complex128): 1e-12,
}  # fmt: skip


def _tighter(tol):
    if tol is None or isinstance(tol, dict):
        return _JAX_TOL
    return {dt: min(float(tol), t) for dt, t in _JAX_TOL.items()}


def _same_as_jax(tc, disk_ans, jax_ans, atol, rtol, what):
    """The DiskArray run's results against the jax.Array run's: tree, shapes and dtypes exactly,
    values within _JAX_TOL (or the test's tolerance where that is smaller)."""
    d_leaves, d_tree = jax.tree.flatten(disk_ans)
    j_leaves, j_tree = jax.tree.flatten(jax_ans)
    tc.assertEqual(d_tree, j_tree, f"{what}: result tree differs from the jax.Array run's")
    for d, j in zip(d_leaves, j_leaves):
        tc.assertEqual(np.shape(d), np.shape(j), f"{what}: shape differs from the jax.Array run's")
        tc.assertEqual(
            jax.numpy.result_type(d) if not hasattr(d, "dtype") else d.dtype,
            jax.numpy.result_type(j) if not hasattr(j, "dtype") else j.dtype,
            f"{what}: dtype differs from the jax.Array run's",
        )
    tc.assertAllClose(
        disk_ans, jax_ans, check_dtypes=True, atol=_tighter(atol), rtol=_tighter(rtol),
        err_msg=f"{what}: values differ from the jax.Array run's",
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# JAX's helpers, on disk


def _noting(args_maker):
    def made():
        args = args_maker()
        note_candidate(args)
        return args

    return made


def _check_against_numpy(
    self, numpy_reference_op, lax_op, args_maker, check_dtypes=True, tol=None, atol=None,
    rtol=None, canonicalize_dtypes=True,
):  # fmt: skip
    if not _STATE["disk"]:
        return _ORIGINAL["check_against_numpy"](
            self, numpy_reference_op, lax_op, _noting(args_maker), check_dtypes=check_dtypes, tol=tol,
            atol=atol, rtol=rtol, canonicalize_dtypes=canonicalize_dtypes,
        )  # fmt: skip
    args = args_maker()
    disk_args = to_disk(args)
    jax_ans = lax_op(*to_jax(args))
    disk_ans = lax_op(*disk_args)
    numpy_ans = numpy_reference_op(*args)
    self.assertAllClose(
        disk_ans, numpy_ans, check_dtypes=check_dtypes, atol=atol or tol, rtol=rtol or tol,
        canonicalize_dtypes=canonicalize_dtypes,
    )  # fmt: skip
    _same_as_jax(self, disk_ans, jax_ans, atol or tol, rtol or tol, "eager")


def _compile_and_check(
    self, fun, args_maker, *, check_dtypes=True, tol=None, rtol=None, atol=None,
    check_cache_misses=True,
):  # fmt: skip
    if not _STATE["disk"]:
        return _ORIGINAL["compile_and_check"](
            self, fun, _noting(args_maker), check_dtypes=check_dtypes, tol=tol, rtol=rtol, atol=atol,
            check_cache_misses=check_cache_misses,
        )  # fmt: skip
    atol, rtol = atol or tol, rtol or tol
    cfun = jax.jit(fun)
    for _ in range(2):  # as JAX's: a second set of arguments through the same compiled function
        args = args_maker()
        disk_args = to_disk(args)
        jax_ans = fun(*to_jax(args))
        python_ans = fun(*disk_args)
        self.assertEqual(
            jax.tree.map(np.shape, python_ans),
            jax.tree.map(lambda x: np.asarray(x).shape, python_ans),
        )
        compiled_ans = cfun(*disk_args)
        self.assertAllClose(
            compiled_ans, python_ans, check_dtypes=check_dtypes, atol=atol, rtol=rtol
        )
        _same_as_jax(self, python_ans, jax_ans, atol, rtol, "eager")
        _same_as_jax(self, compiled_ans, jax_ans, atol, rtol, "jit")


def _check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    original = _ORIGINAL["check_grads"]
    if not _STATE["disk"]:
        note_candidate(args)
        return original(f, args, order, modes=modes, atol=atol, rtol=rtol, eps=eps)
    args = tuple(args)
    disk_args = to_disk(args)
    original(f, disk_args, order, modes=modes, atol=atol, rtol=rtol, eps=eps)
    # And against JAX on jax.Arrays: the value, one JVP and one VJP along the same directions.
    tc = unittest.TestCase()
    tc.assertAllClose = jtu.JaxTestCase.assertAllClose.__get__(tc)
    tc.assertArraysAllClose = jtu.JaxTestCase.assertArraysAllClose.__get__(tc)
    tc.assertDtypesMatch = jtu.JaxTestCase.assertDtypesMatch.__get__(tc)
    rand = np.random.RandomState(0)
    tangent = jax.tree.map(lambda x: public_test_util.rand_like(rand, x), args)
    args = to_jax(args)
    jax_out, jax_tan = jax.jvp(f, args, tangent)
    disk_out, disk_tan = jax.jvp(f, disk_args, tangent)
    _same_as_jax(tc, disk_out, jax_out, atol, rtol, "value")
    _same_as_jax(tc, disk_tan, jax_tan, atol, rtol, "jvp")
    if "rev" in modes:
        jax_out, jax_vjp = jax.vjp(f, *args)
        disk_out, disk_vjp = jax.vjp(f, *disk_args)
        cotangent = jax.tree.map(lambda x: public_test_util.rand_like(rand, x), jax_out)
        _same_as_jax(tc, disk_vjp(cotangent), jax_vjp(cotangent), atol, rtol, "vjp")


def _check_batching_on_disk(original):
    def check_batching(self, op, bdim_size, bdims, shapes, dtypes, rng, *a, **kw):
        if not _STATE["disk"]:
            _STATE["candidate"] = _STATE["candidate"] or any(
                _storable(np.zeros(0, d)) for d in dtypes if d is not None
            )
            return original(self, op, bdim_size, bdims, shapes, dtypes, rng, *a, **kw)
        # JAX's own check with the batched arguments on disk: vmap(op) gets DiskArrays, the
        # per-example reference gets the plain arrays; then vmap(op) on the plain arrays.
        made = []

        def disk_op(*args):
            return op(*args)

        def vmap(fn, in_axes):
            def run(*args):
                made.append(args)
                return _VMAP(fn, in_axes)(*to_disk(args))

            return run if fn is disk_op else _VMAP(fn, in_axes)

        saved = jax.vmap
        jax.vmap = vmap
        try:
            original(self, disk_op, bdim_size, bdims, shapes, dtypes, rng, *a, **kw)
        finally:
            jax.vmap = saved
        if made:
            rtol, atol = kw.get("rtol"), kw.get("atol")
            disk_ans = _VMAP(op, bdims)(*to_disk(made[0]))
            _same_as_jax(self, disk_ans, _VMAP(op, bdims)(*made[0]), atol, rtol, "vmap")

    check_batching._jask_conformance = True
    return check_batching


def _install():
    jtu.JaxTestCase._CheckAgainstNumpy = _check_against_numpy
    jtu.JaxTestCase._CompileAndCheck = _compile_and_check
    public_test_util.check_grads = _check_grads
    jax.test_util.check_grads = _check_grads
    if hasattr(jtu, "check_grads"):
        jtu.check_grads = _check_grads


def _patch_class(cls):
    original = cls.__dict__.get("_CheckBatching")
    if original is not None and not getattr(original, "_jask_conformance", False):
        cls._CheckBatching = _check_batching_on_disk(original)


# ---------------------------------------------------------------------------------------------
# Running each test twice and recording it


class _Timeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Timeout(f"over {_timeout()} s")


def _timeout():
    return int(os.environ.get("JASK_CONFORMANCE_TIMEOUT", "120"))


def _record(line):
    out = os.environ.get("JASK_CONFORMANCE_OUT")
    if not out:
        return
    with open(os.path.join(out, f"{_WORKER[0]}.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()


def _baseline(item):
    """The test as JAX wrote it, through unittest: 'passed', 'failed' or 'skipped'."""
    case = item.parent.obj(item.name)
    result = unittest.TestResult()
    _STATE["disk"] = False
    signal.alarm(_timeout())
    try:
        case.run(result)
    except _Timeout:
        return "failed", "timeout"
    finally:
        signal.alarm(0)
    if result.errors or result.failures:
        (_, tb), *_ = result.errors + result.failures
        return "failed", tb.strip().splitlines()[-1][:300]
    if result.skipped:
        return "skipped", None
    return "passed", None


def _jask_frame(tb):
    """The innermost traceback frame in Jask's package (file:line function), if any."""
    package = os.path.dirname(os.path.abspath(jask.__file__)) + os.sep  # not a folder name
    where = None
    for frame in traceback.extract_tb(tb):
        if os.path.abspath(frame.filename).startswith(package):
            where = f"{os.path.abspath(frame.filename)[len(package) :]}:{frame.lineno} {frame.name}"
    return where


# This run's xdist worker id ("main" without xdist), from its own config: a run started from
# inside an xdist worker (tests/test_conformance_sample.py) inherits that worker's environment.
_WORKER = ["main"]


def pytest_configure(config):
    _WORKER[0] = getattr(config, "workerinput", {}).get("workerid", "main")
    _SCRATCH.append(tempfile.mkdtemp(prefix="jask_conformance_"))
    jask.set_memory_budget(
        os.environ.get("JASK_CONFORMANCE_BUDGET", "64MB"), scratch_dir=_SCRATCH[0]
    )
    _install()
    signal.signal(signal.SIGALRM, _on_alarm)


def pytest_unconfigure(config):
    for d in _SCRATCH:
        shutil.rmtree(d, ignore_errors=True)


def pytest_runtest_setup(item):
    _patch_class(item.parent.obj)
    if os.environ.get("JASK_CONFORMANCE_BASELINE", "1") == "1":
        _STATE["candidate"] = False
        outcome, error = _baseline(item)
        _record({"id": item.nodeid, "baseline": outcome, "baseline_error": error})
        if outcome != "passed" or not _STATE["candidate"]:
            pytest.skip(
                f"not run with DiskArrays: the baseline {outcome}"
                if outcome != "passed"
                else "not run with DiskArrays: JAX's helpers got no array Jask stores"
            )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    _STATE["disk"], _STATE["received"], _STATE["start"] = True, False, time.monotonic()
    signal.alarm(_timeout())
    try:
        return (yield)
    finally:
        signal.alarm(0)
        _STATE["disk"] = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "setup" and report.outcome == "skipped":
        _record({"id": item.nodeid, "received": False, "disk": "not run"})
    if call.when == "call":
        seconds = round(time.monotonic() - _STATE["start"], 2)
        line = {
            "id": item.nodeid,
            "received": _STATE["received"],
            "disk": report.outcome,
            "seconds": seconds,
        }
        if call.excinfo is not None and report.outcome == "failed":
            e = call.excinfo
            line["error"] = f"{e.typename}: {str(e.value).strip()}"[:600]
            line["where"] = _jask_frame(e.tb)
        _record(line)
    return report
