# evennia-ai: `make demo` plays the offline demo, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test evennia-test bench format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/tick_overhead.py

format: $(STAMP)
	$(BIN)/black --line-length 100 ai bench demo
	$(BIN)/isort --profile black --line-length 100 ai bench demo

clean:
	rm -rf build .pytest_cache
