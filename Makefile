# Two entry points: `make run` and `make test`. Both set up .venv on first use
# (run: the runtime dependencies; test: those plus the test tools), with the exact
# versions in constraints.txt; pyproject.toml only gives the ranges a library install needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q -c constraints.txt

.PHONY: run server test bench lock clean

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

test: $(VENV)/.test-deps
	$(BIN)/ruff check conveyor tests bench
	$(BIN)/python -m pytest -q

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
	rm -rf $(VENV) conveyor-data
