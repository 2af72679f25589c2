# Two commands do all the set-up from a fresh clone: `make run` and `make test`, each from its lock in requirements/.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.9
UV := .tools/uv/bin/uv
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test test-fast setup test-setup lint check bench clean lock upgrade lock-check

lock-check:
	@$(PYTHON) scripts/locks.py check

$(PY):
	$(PYTHON) -m venv $(VENV)

# Exact versions with their hashes, then the project itself, built by the locked setuptools (no index needed).
$(VENV)/.%-installed: requirements/%.txt pyproject.toml | lock-check $(PY)
	$(PY) -m pip install --quiet --require-hashes -r requirements/$*.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

setup: $(VENV)/.run-installed
	bash scripts/setup_sandbox.sh
	bash scripts/setup_llm.sh model

test-setup: $(VENV)/.test-installed
	bash scripts/setup_sandbox.sh
	bash scripts/setup_llm.sh
	bash scripts/setup_postgres.sh
	bash scripts/setup_mcp.sh
	bash scripts/setup_ui.sh
	bash scripts/setup_promtool.sh

run: setup
	$(VENV)/bin/ice-mcp serve --http --blueprints blueprints --log-level info

# Byte-compiled first: with PYTHONDONTWRITEBYTECODE set, every server a test starts would compile ~180 modules (~0.7 s).
# Most tests wait on servers, stores and clocks more than they compute, so they run on CI_WORKERS pytest-xdist workers
# (a file's tests on one worker, sharing its servers); the tests whose outcome hangs on timing (`alone`: the server's
# answers timed, a 2 s heartbeat) run after them, with nothing beside them.
# The checks (ruff, mypy, the import contracts: ~35 s of one core) run beside the parallel part, which mostly waits;
# either failing fails the target, the checks' report printed after the tests'.
CI_WORKERS ?= 3
test: test-setup
	$(PY) -m compileall -q ice_mcp
	@$(MAKE) --no-print-directory check > .check.log 2>&1 & checks=$$!; \
	  $(PY) -m pytest -q -n $(CI_WORKERS) --dist loadfile -m "not alone"; status=$$?; \
	  wait $$checks || status=1; cat .check.log; rm -f .check.log; exit $$status
	$(PY) -m pytest -q -m alone

# The inner loop: the in-process tests (no server, store, browser or compile of their own) on TEST_WORKERS
# pytest-xdist workers; `make test` (CI) runs everything.
TEST_WORKERS ?= 4
test-fast: test-setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not live and not slow"

lint: $(VENV)/.test-installed check

check:
	$(VENV)/bin/ruff check ice_mcp ice_mcp_dev tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

bench: setup $(VENV)/.bench-installed
	$(PY) bench/engine.py

# `make lock` locks what pyproject.toml's ranges now say, keeping every locked version it can;
# `make upgrade` moves every lock to the newest versions the ranges allow. Commit requirements/ after `make test`.
$(UV):
	$(PYTHON) -m venv .tools/uv
	.tools/uv/bin/python -m pip install --quiet uv==$(UV_VERSION)

lock: $(UV)
	$(PYTHON) scripts/locks.py compile --uv $(UV) $(if $(UPGRADE),--upgrade)

upgrade:
	$(MAKE) lock UPGRADE=1

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache
