# Two entry points: `make run` and `make test`. Both set up .venv on first use
# (run: the runtime dependencies; test: those plus the test tools).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run server test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

run: $(VENV)/.run-deps
	$(BIN)/conveyor up --demo

server: $(VENV)/.run-deps
	$(BIN)/conveyor server

test: $(VENV)/.test-deps
	$(BIN)/ruff check conveyor tests bench
	$(BIN)/python -m pytest -q

bench: $(VENV)/.test-deps
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) conveyor-data
