"""Jask's benchmark harness: `python -m bench` (see bench/__main__.py)."""

# bench.workloads imports bench.formats at its end, so it must be the one imported first
from . import workloads as _workloads  # noqa: F401
