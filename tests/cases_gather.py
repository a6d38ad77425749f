"""Generic op-test cases (run by test_transformations.py over every transformation and budget)."""
from case import Case, K, M, N  # noqa: F401

CASES: list[Case] = []
