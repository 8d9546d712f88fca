# paperflows: `make repro` sets up and runs every paper; `make test` sets up and runs the tests.
VENV ?= .venv
BIN := $(VENV)/bin
PREFECT_API := http://127.0.0.1:4200/api
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup repro test bench stop clean-smoke

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements-nodeps.txt constraints.txt
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
# pip byte-compiles what it installs, on purpose: `--no-compile` cut the setup from 1 min 40 s to 44 s, but where
# PYTHONDONTWRITEBYTECODE is set (this CI machine) no module is cached then: every process compiles its imports
# again (~4 s more each) and the tests took 1 min 48 s longer
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0   # the CPU build; an open range would pull a CUDA build
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,dask]'   # every version as constraints.txt says
	$(BIN)/pip install -q -c constraints.txt --no-deps -r requirements-nodeps.txt   # why: see the file's header
	touch $@

repro: setup  ## run every paper (DVC skips the unchanged ones) against one local Prefect server
	$(BIN)/paperflows check
	$(BIN)/paperflows dvc-yaml --check
	$(BIN)/paperflows server up
	PREFECT_API_URL=$(PREFECT_API) $(BIN)/paperflows repro
	$(BIN)/paperflows list

# One test worker more than there are cores: a worker often waits (on the stage processes a DVC or CLI test starts, on
# another worker converting a language model, on the Prefect API), and the extra one keeps the cores busy. On 2 cores
# its gain is within the spread between clean-clone runs (README); 4 workers were slower
TEST_WORKERS ?= $(shell python3 -c "import os; print(os.cpu_count() + 1)")

test: setup  ## the tests on every core and one more worker (pytest-xdist; an idle worker steals queued tests from a busy one); the 25 slowest listed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=25

bench: setup
	$(BIN)/python benchmarks/bench_harness.py
	$(BIN)/python benchmarks/bench_orchestration.py
	$(BIN)/python benchmarks/bench_lapsum.py
	$(BIN)/python benchmarks/bench_two_sample.py
	$(BIN)/python benchmarks/bench_graphs.py
	$(BIN)/python benchmarks/bench_pinning.py
	$(BIN)/python benchmarks/bench_nanny_malloc.py
	$(BIN)/python benchmarks/bench_papers.py

stop:
	$(BIN)/paperflows server down

clean-smoke:
	rm -rf .paperflows/smoke
