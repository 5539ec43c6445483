# Two entry points: `make run` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run server test lint bench clean

$(BIN)/conveyor: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

run: $(BIN)/conveyor
	$(BIN)/conveyor up --demo

server: $(BIN)/conveyor
	$(BIN)/conveyor server

test: $(BIN)/conveyor
	$(BIN)/ruff check conveyor tests bench
	$(BIN)/python -m pytest -q

bench: $(BIN)/conveyor
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) conveyor-data
