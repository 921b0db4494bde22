# dpone-dagster: the README's two commands are `make demo` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dpone-installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DAGSTER_HOME ?= $(CURDIR)/.dpone/dagster_home
# The embedded default's executable synthetic-family release resolves its two connections by alias
# from these variables (the standard runtime's credential port); files inside its own sandbox lake.
export DPONE_CONNECTION_ORDERS_SOURCE ?= orders_source.duckdb
export DPONE_CONNECTION_FLOW_LAKE ?= flow_lake.duckdb

.PHONY: install demo test dev bench screenshots check-defs clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,screenshots]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@mkdir -p $(DAGSTER_HOME)
	$(BIN)/dpone demo

test: $(STAMP)
	@mkdir -p $(DAGSTER_HOME)
	$(BIN)/python -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

dev: $(STAMP)
	@mkdir -p $(DAGSTER_HOME)
	$(BIN)/dpone prepare
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

check-defs: $(STAMP)
	$(BIN)/dagster definitions validate -w workspace.yaml

bench: $(STAMP)
	$(BIN)/python -m bench

screenshots: $(STAMP)
	$(BIN)/python -m bench.screenshots

clean:
	rm -rf .dpone dbt_project_synthetic/target
