"""make test's sample of the suite (tests/conftest.py): every function tests/slow_tests.txt names
exists, and the sample depends on the test ids only."""

import importlib
import math
import random

import conftest


def test_every_listed_slow_test_exists():
    missing = []
    for name in sorted(conftest.slow_tests()):
        path, *qualname = name.split("[", 1)[0].split("::")
        module = importlib.import_module(path.removeprefix("tests/").removesuffix(".py"))
        target = module
        for part in qualname:
            target = getattr(target, part, None)
        if not callable(target):
            missing.append(name)
    assert not missing, f"tests/slow_tests.txt names tests that do not exist: {missing}"


class _Case:
    def __init__(self, nodeid):
        self.nodeid = nodeid
        self.callspec = object()


def test_the_sample_depends_on_the_ids_only():
    cases = [_Case(f"tests/test_x.py::test_f[case{k}]") for k in range(40)]
    shuffled = random.Random(1).sample(cases, len(cases))
    chosen = [c.nodeid for c in conftest._sampled(cases, slow=False)]
    assert chosen == [c.nodeid for c in conftest._sampled(shuffled, slow=False)]
    assert len(chosen) == math.ceil(40 * conftest.SAMPLE_FRACTION) == 2  # 5% of 40
    assert len(conftest._sampled(cases, slow=True)) == 1
    assert conftest._sampled(cases[:2], slow=False) == cases[:2]
    pinned = frozenset({cases[7].nodeid})
    assert conftest._sampled(shuffled, slow=True, pinned=pinned) == [cases[7]]
