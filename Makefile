# make demo: set up .venv and run example.py.  make test: set up and run the tests (a sample
# of the widest parametrizations; make test-full: every case).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CPP_BUILD := build/cpp-tests
PY_BUILD := build/python

.PHONY: demo test test-full test-python test-cpp test-sanitize fuzz lint lint-cpp lint-python install bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Build requirements go into the venv so rebuilds are incremental (build/ is kept).
install: $(BIN)/python
	./scripts/ensure-codecs.sh
	$(BIN)/pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" "jaxlib==0.10.2"
	$(BIN)/pip install -q --no-build-isolation -e ".[test]"

demo: install
	$(BIN)/python example.py

test: install test-cpp test-python

# make test runs a fixed sample of the suite (JASK_TEST_SAMPLE in tests/conftest.py: 5% of
# each parametrization's cases, one case of the slowest functions, tests/slow_tests.txt; the
# hostile-file fuzzers run half their default trials, JASK_FUZZ_SCALE), with
# XLA's backend optimizations off: most of the suite's time is XLA compiling small programs, and
# -O0 code cut it by a quarter (102 s to 79 s for two test files); both sides of every comparison
# (Jask's blocks and jnp) are compiled the same way. make test-full runs every case with XLA's
# default flags (34.5 minutes of Python tests on 2 cores).
test-full: install test-cpp
	$(MAKE) test-python SAMPLE=0 TEST_XLA_FLAGS= FUZZ_SCALE=1

# Two workers (pytest-xdist), each test file on one of them (module fixtures are set up once).
# The memory-limit tests run on their own under pytest-memray, which tracks every allocation.
SAMPLE ?= 1
TEST_XLA_FLAGS ?= --xla_backend_optimization_level=0
FUZZ_SCALE ?= 0.5
test-python:
	XLA_FLAGS="$(TEST_XLA_FLAGS) $$XLA_FLAGS" JASK_TEST_SAMPLE=$(SAMPLE) JASK_FUZZ_SCALE=$(FUZZ_SCALE) \
	  $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 \
	  tests --ignore=tests/test_memory_limits.py
	XLA_FLAGS="$(TEST_XLA_FLAGS) $$XLA_FLAGS" $(BIN)/python -m pytest -q --memray tests/test_memory_limits.py

# Once the Python extension is built (make install; its build folder is pyproject.toml's
# build-dir), the tests build in that folder and reuse its engine objects (about 2 minutes
# fewer on 2 cores); without it, in a folder of their own.
test-cpp:
	./scripts/ensure-gtest.sh
	if [ -f $(PY_BUILD)/CMakeCache.txt ]; then dir=$(PY_BUILD); opts=; \
	else dir=$(CPP_BUILD); opts="-DJASK_BUILD_PYTHON=OFF -DCMAKE_BUILD_TYPE=Release"; fi; \
	cmake -S . -B $$dir $$opts -DJASK_BUILD_TESTS=ON >/dev/null && \
	cmake --build $$dir --target engine_tests -j2 && \
	ctest --test-dir $$dir -j2 --output-on-failure

# The hostile-file fuzzers (tests/test_trust_*.py, through tests/fuzz_harness.py) with thousands
# of trials per format instead of make test's few hundred, and the slow valid-file tests (a deflated
# .npz member over 1 GiB). The seeds are fixed: a run is repeatable.
FUZZ_TRIALS ?= 3000
fuzz: install
	JASK_FUZZ_TRIALS=$(FUZZ_TRIALS) JASK_SLOW_TESTS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile \
	  tests/test_fuzz_harness.py $(wildcard tests/test_trust_*.py)

# The engine's GoogleTests under AddressSanitizer + UndefinedBehaviorSanitizer (all of
# them), then under ThreadSanitizer (the threaded parts: pipeline, file I/O and scattered runs,
# gathers, elementwise programs cut between threads, slabs, update_ and
# its journal, the budget's turns).
SANITIZE_BUILD := -DJASK_BUILD_PYTHON=OFF -DJASK_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1
TSAN_TESTS := Concurrency*:Pipeline*:Stats*:FileIo*:IoRuns*:Gather*:ScatterAdd*:Programs*:Readahead*:Hyperslab*:Update*:MemoryBudget*:Journal*
test-sanitize:
	./scripts/ensure-gtest.sh
	cmake -S . -B build/asan $(SANITIZE_BUILD) -DJASK_SANITIZE=address,undefined >/dev/null
	cmake --build build/asan -j2
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build/asan -j2 --output-on-failure
	cmake -S . -B build/tsan $(SANITIZE_BUILD) -DJASK_SANITIZE=thread >/dev/null
	cmake --build build/tsan -j2
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ./scripts/without-aslr.sh \
	  build/tsan/engine_tests --gtest_filter='$(TSAN_TESTS)'

# clang-format 14 (Debian's; scripts/ensure-clang-format.sh installs it) over the engine,
# its bindings and its tests.
CPP_SOURCES = $(shell git ls-files 'src/*.cpp' 'src/*.hpp' 'tests/cpp/*.cpp' 'tests/cpp/*.hpp')
lint-cpp:
	./scripts/ensure-clang-format.sh
	clang-format --dry-run -Werror $(CPP_SOURCES)

# ruff (config in pyproject.toml) over the Python sources.
PYTHON_SOURCES := jask tests bench examples example.py
lint-python: install
	$(BIN)/ruff check $(PYTHON_SOURCES)
	$(BIN)/ruff format --check $(PYTHON_SOURCES)

lint: lint-cpp lint-python

# JAX's own tests (tests/conformance/jax_tests/, at jax-v0.10.2, unchanged) with DiskArrays given to
# the function under test, compared with NumPy's reference and with the same function on jax.Arrays;
# a table per file (baseline passes, tests that received a DiskArray, passes at each budget) and the
# failures grouped by error in build/conformance/conformance.md. CONFORMANCE_CASES is JAX's
# JAX_NUM_GENERATED_CASES (cases sampled with JAX's fixed seed); CONFORMANCE_PER_FILE tests of each
# file, evenly spread (0: all 3,254 of CASES=1, about two hours on 2 cores); see tests/conformance/run.py.
CONFORMANCE_CASES ?= 1
CONFORMANCE_PER_FILE ?= 25
CONFORMANCE_BUDGETS ?= 64MB,64KB
.PHONY: conformance
conformance: install
	$(BIN)/python tests/conformance/run.py --cases $(CONFORMANCE_CASES) --per-file $(CONFORMANCE_PER_FILE) \
	  --budgets $(CONFORMANCE_BUDGETS) --workers 2

# python -m bench --quick: the same in under 2 minutes; see BENCHMARKS.md for the scaling sweep.
bench: install
	$(BIN)/pip install -q --no-build-isolation -e ".[bench]"
	$(BIN)/python -m bench

clean:
	rm -rf build .venv .jask_scratch
