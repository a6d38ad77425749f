# make demo: set up .venv and run example.py.  make test: set up and run every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CPP_BUILD := build/cpp-tests

.PHONY: demo test test-python test-cpp install bench clean lint-python

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Build requirements go into the venv so rebuilds are incremental (build/ is kept).
install: $(BIN)/python
	$(BIN)/pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" "jaxlib==0.10.2"
	$(BIN)/pip install -q --no-build-isolation -e ".[test]"

demo: install
	$(BIN)/python example.py

test: install test-cpp test-python

# The memory-limit tests run on their own under pytest-memray, which tracks every allocation.
test-python:
	$(BIN)/python -m pytest -q tests --ignore=tests/test_memory_limits.py
	$(BIN)/python -m pytest -q --memray tests/test_memory_limits.py

test-cpp:
	./scripts/ensure-gtest.sh
	cmake -S . -B $(CPP_BUILD) -DJASK_BUILD_PYTHON=OFF -DJASK_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CPP_BUILD) -j2
	ctest --test-dir $(CPP_BUILD) --output-on-failure

lint-python: install
	$(BIN)/ruff check jask tests bench examples

# python -m bench --quick: the same in under 2 minutes; see BENCHMARKS.md for the scaling sweep.
bench: install
	$(BIN)/pip install -q --no-build-isolation -e ".[bench]"
	$(BIN)/python -m bench

clean:
	rm -rf build .venv .jask_scratch
