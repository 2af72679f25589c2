# Two commands do all the set-up from a fresh clone: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test setup test-setup lint check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

setup: $(STAMP)
	bash scripts/setup_sandbox.sh
	bash scripts/setup_llm.sh model

test-setup: setup
	bash scripts/setup_llm.sh
	bash scripts/setup_mcp.sh
	bash scripts/setup_ui.sh

run: setup
	$(VENV)/bin/ice-mcp serve --http --blueprints blueprints --log-level info

test: test-setup check
	$(PY) -m pytest -q

lint: setup check

check:
	$(VENV)/bin/ruff check ice_mcp tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

bench: setup
	$(PY) -m pip install --quiet -e '.[test,bench]'
	$(PY) bench/engine.py

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache
