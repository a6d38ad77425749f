"""JAX's test files under jax_tests/ run only through tests/conformance/run.py (its own pytest.ini
and plugin.py); `pytest tests` leaves them alone (tests/test_conformance_sample.py runs a sample)."""

import os

if os.environ.get("JASK_CONFORMANCE_OUT") is None:
    collect_ignore = ["jax_tests", "plugin.py", "run.py"]
