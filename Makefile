# Two entry points: `make run` and `make test`. Both set up .venv on first use
# (run: the runtime dependencies; test: those plus the test tools), with the exact
# versions in constraints.txt; pyproject.toml only gives the ranges a library install needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q -c constraints.txt

.PHONY: run server test test-compiled bench lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.run-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[dev]'
	touch $@

run: $(VENV)/.run-deps
	$(BIN)/conveyor up --demo

server: $(VENV)/.run-deps
	$(BIN)/conveyor server

# Most tests wait on the servers, workers and databases they start, so two pytest workers
# halve the suite's time even on two cores (34 to 15 minutes here); a file's tests stay on one
# worker (its fixtures: one server each). TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
PYTEST := -m pytest -q -n $(TEST_WORKERS) --dist loadfile
test: $(VENV)/.test-deps
	$(BIN)/ruff check conveyor tests bench setup.py
	$(BIN)/python $(PYTEST)

# The compiled build (setup.py): its wheel in a venv of its own, then the suite on it, but for
# tests/packaging (it packages this checkout's source: the pure build). PYTHONSAFEPATH and
# --import-mode=append keep this checkout's pure-Python conveyor/ off sys.path, for the tests
# and for every server and worker they start.
COMPILED_VENV := .venv-compiled
COMPILED_TESTS ?= tests --ignore=tests/packaging
test-compiled: $(VENV)/.test-deps
	rm -rf build dist/compiled
	CONVEYOR_COMPILE=1 $(BIN)/python -m pip wheel -q --no-deps --no-build-isolation \
	  -w dist/compiled .
	rm -rf build $(COMPILED_VENV)
	$(PYTHON) -m venv $(COMPILED_VENV)
	$(COMPILED_VENV)/bin/python -m pip install -q -c constraints.txt \
	  "conveyor-sqs[dev] @ file://$$(ls $(CURDIR)/dist/compiled/*.whl)"
	PYTHONSAFEPATH=1 CONVEYOR_EXPECT_COMPILED=1 $(COMPILED_VENV)/bin/python $(PYTEST) \
	  --import-mode=append -p no:cacheprovider $(COMPILED_TESTS)

bench: $(VENV)/.test-deps
	$(PIP) -e '.[dev,bench]'
	$(BIN)/python bench/run.py

# Re-resolve constraints.txt in a scratch venv: every extra, transitive packages included.
# Lines already there hold their versions; delete a line (or all) to move it forward.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q --upgrade pip
	.lock-venv/bin/python -m pip install -q -c constraints.txt '.[dev,bench,sim]'
	{ sed -n '/^#/p' constraints.txt; .lock-venv/bin/python -m pip freeze --all \
	  | grep -viE '^(conveyor-sqs|pip)( |=|@)'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) $(COMPILED_VENV) build dist conveyor-data
