"""Shared fixtures: a scratch folder on disk for the session, and the memory budgets tests run under."""

import math
import os
import pathlib
import zlib

import jax
import numpy as np
import pytest

import jask

# JAX's own test files (tests/conformance/jax_tests/) run only through tests/conformance/run.py,
# with its own pytest.ini and plugin (tests/test_conformance_sample.py runs a sample of them).
# No conftest.py of their own there: a second module named `conftest` would shadow this one for
# `from conftest import ...` in the test modules.
if os.environ.get("JASK_CONFORMANCE_OUT") is None:
    collect_ignore = ["conformance"]

DEFAULT_BUDGET = "64MB"
# One block per op; a few blocks; 50 or more blocks per op on the shapes in tests.
BUDGETS = {"1GB": "1GB", "64KB": "64KB", "4KB": "4KB"}


@pytest.fixture(scope="session", autouse=True)
def scratch_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("jask_scratch")
    jask.set_memory_budget(DEFAULT_BUDGET, scratch_dir=root)
    return root


@pytest.fixture(params=list(BUDGETS), ids=lambda b: f"budget={b}")
def budget(request):
    jask.set_memory_budget(BUDGETS[request.param])
    yield BUDGETS[request.param]
    jask.set_memory_budget(DEFAULT_BUDGET)


# The same for gradients of every order: their jitted programs hold in-memory values (cotangents,
# residuals) beside the ops' blocks, and the budget bounds both (tests/test_memory_bound.py):
# of 4KB, what is left for blocks is too little for fused ops of 7 or more operands.
GRADIENT_BUDGETS = {"1GB": "1GB", "64KB": "64KB", "8KB": "8KB"}
SMALLEST_GRADIENT_BUDGET = GRADIENT_BUDGETS["8KB"]


@pytest.fixture(params=list(GRADIENT_BUDGETS), ids=lambda b: f"budget={b}")
def gradient_budget(request):
    jask.set_memory_budget(GRADIENT_BUDGETS[request.param])
    yield GRADIENT_BUDGETS[request.param]
    jask.set_memory_budget(DEFAULT_BUDGET)


@pytest.fixture
def x64():
    """x64 on for one test: float64 data keeps the file's own dtype, so a format's tests see its
    float64 decoding exactly (with x64 off every opener gives float32, as jnp.asarray would:
    tests/test_formats_x64.py)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def small_budget():
    """Sets a tiny budget for one test."""

    def set_budget(b):
        jask.set_memory_budget(b)

    yield set_budget
    jask.set_memory_budget(DEFAULT_BUDGET)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def assert_close(actual, expected, rtol=1e-5):
    """Elementwise closeness with an absolute floor scaled to the data (float32 sums reorder)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


def assert_same(out, expected):
    """Shape and dtype equal, values close (floats, scaled as assert_close) or equal (others)."""
    assert out.shape == expected.shape and out.dtype == expected.dtype, (out, expected)
    if np.issubdtype(expected.dtype, np.floating):
        assert_close(np.asarray(out), np.asarray(expected))
    else:
        np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))


def jvp_reference(fn, x, t):
    """jax.jvp of fn at the in-memory x along t, jitted: one compiled program for the reference
    instead of one per primitive (eagerly)."""
    return jax.jit(lambda x, t: jax.jvp(fn, (x,), (t,)))(x, t)


def assert_trees_match(actual, expected, rtol=1e-4):
    """Same tree structure, dtypes exactly, every leaf close to the reference's (assert_close)."""
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for (path, a), e in zip(
        jax.tree_util.tree_leaves_with_path(actual), jax.tree.leaves(expected), strict=True
    ):
        where = jax.tree_util.keystr(path)
        assert np.shape(a) == np.shape(e), (where, np.shape(a), np.shape(e))
        a, e = (jax.random.key_data(v) if is_prng_key(v) else np.asarray(v) for v in (a, e))
        assert np.asarray(a).dtype == np.asarray(e).dtype, (where, a.dtype, e.dtype)
        assert_close(a, e, rtol=rtol)


def is_prng_key(value):
    return jax.dtypes.issubdtype(getattr(value, "dtype", None), jax.dtypes.prng_key)


# --- make test runs a sample of the widest parametrizations; pytest alone runs every case ---
#
# With JASK_TEST_SAMPLE=1 (make test: 20 minutes on 2 cores), a test function with more than two
# generated cases runs SAMPLE_FRACTION of them, and one of a function listed in
# tests/slow_tests.txt (the case the list names: the cheapest measured; none of a listed function
# without parameters). Cases are chosen by a hash
# of their id only (not by the folder, the order or the machine), so the sample is the same on
# every run. Without it (plain pytest, make test-full) every case runs.
SAMPLE_FRACTION = 0.05
SLOW_TESTS = pathlib.Path(__file__).with_name("slow_tests.txt")


def slow_tests() -> set[str]:
    lines = SLOW_TESTS.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def _sampled(cases: list, slow: bool, pinned: frozenset = frozenset()) -> list:
    """The cases of one test function make test runs (`pinned`: the case ids the slow list
    names; a hashed one where none of them is among the cases)."""
    if slow and len(cases) == 1 and not hasattr(cases[0], "callspec"):
        return []
    if len(cases) <= 2 and not slow:
        return cases
    named = [item for item in cases if item.nodeid in pinned]
    if slow and named:
        return named[:1]
    count = 1 if slow else math.ceil(len(cases) * SAMPLE_FRACTION)
    return sorted(cases, key=lambda item: zlib.crc32(item.nodeid.encode()))[:count]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("JASK_TEST_SAMPLE") != "1":
        return
    listed = slow_tests()
    slow = {name.split("[", 1)[0] for name in listed}
    pinned = frozenset(name for name in listed if "[" in name)
    by_function: dict[str, list] = {}
    for item in items:
        by_function.setdefault(item.nodeid.split("[", 1)[0], []).append(item)
    kept = set()
    for name, cases in by_function.items():
        kept.update(map(id, _sampled(cases, name in slow, pinned)))
    deselected = [item for item in items if id(item) not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if id(item) in kept]
