# Two entry points for a fresh machine: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
# The stamp changes whenever the lock or the project metadata changes, so a second
# `make demo` reuses the environment and an edited lock reinstalls it.
LOCK_HASH := $(shell cat requirements.lock pyproject.toml | sha256sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(LOCK_HASH)

export PIPELINE_STORAGE_ROOT ?= file://$(CURDIR)/.data
export AIRFLOW_HOME ?= $(CURDIR)/.airflow

.PHONY: install demo standalone test test-bench test-fast compose-test bench bench-quick lint browser clean help

help:
	@echo "make demo   - install, land flights data, run the ETL DAG and the training DAG locally"
	@echo "make standalone - airflow standalone (UI on :8080) with the DAGs, plugin and pools"
	@echo "make test   - install and run the whole test suite"
	@echo "make test-bench - the bench harness's end-to-end checks (tiny runs of the scoring, tuning and drawn parts)"
	@echo "make compose-test - build docker-compose.yml's stack and run it end to end (Docker set up if absent)"
	@echo "make bench  - ETL vs floor and peers, fixed overhead, input vs parse ceiling, segment costs, the gauntlet of public tables vs their references, the drawn gauntlet of 2 x 100 seeded (table, label) pairs (bench/results.json)"
	@echo "make bench-quick - check the bench harness in minutes: one week, 1x (bench/results-quick.json)"

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
	  || { echo "Python >= 3.11 required (set PYTHON=python3.11)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

demo: install
	$(BIN)/python scripts/demo.py

# The "Airflow standalone" commands of docs/AIRFLOW.md: components start as `airflow ...`, so the venv's
# bin must be on PATH; the pools need a migrated database.
standalone: install
	export PATH="$(CURDIR)/$(BIN):$$PATH" AIRFLOW__CORE__DAGS_FOLDER="$(CURDIR)/dags" \
	  AIRFLOW__CORE__PLUGINS_FOLDER="$(CURDIR)/plugins" AIRFLOW__CORE__LOAD_EXAMPLES=False \
	  && airflow db migrate && airflow pools set dask 2 "Heavy ETL tasks" \
	  && airflow pools set gpu 1 "Training: one slot per GPU" && exec airflow standalone

# Chromium (Debian's package) drives the UI tests; installed here when we are root with apt.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: browser tests will skip"; }

# TEST_WORKERS: pytest-xdist processes (default 2, what CI has); a file's tests run in one of them.
TEST_WORKERS ?= 2
test: install browser
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not bench" $(PYTEST_ARGS)

# The bench harness's own end-to-end checks (a part run on a tiny input): minutes of training
# whose figures are make bench's, so make test leaves them out.
test-bench: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m bench $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -q -m "not integration and not e2e" $(PYTEST_ARGS)

# The compose deployment built and run for real: Docker engine, Compose v2 and base-image
# stand-ins only when absent; always torn down (docs/AIRFLOW.md, docker/compose-test/run.sh).
compose-test: install
	bash docker/compose-test/run.sh

# BENCH_ARGS: --scales 1,4 (default 1,4,16), --peers tfx_beam,ray_data ('' for none),
# --peer-scale N (the scale the peers run on; default the largest), --peer-timeout SECONDS
# (default 3600; a stopped peer is recorded as timed out), --quick.
# The peers install into bench/.peers/<name> (their own uv virtualenvs), never into $(VENV).
bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-quick: install
	$(BIN)/python -m bench --quick $(BENCH_ARGS)

lint: install
	$(BIN)/ruff check etl training dags plugins tests scripts bench
	PYTHONPATH=plugins $(BIN)/lint-imports

clean:
	rm -rf .data .airflow .demo
