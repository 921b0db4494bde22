# dpone-dagster: the README's two commands are `make demo` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dpone-installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# One Dagster instance per workspace: `dpone dev` / `dpone demo` use $DAGSTER_HOME when you set it,
# else the workspace's own home (.dpone/dagster_home for prod, .dpone/workspaces/<fork>/dagster_home).
# The embedded default's executable synthetic-family release resolves its two connections by alias
# from these variables (the standard runtime's credential port); files inside its own sandbox lake.
export DPONE_CONNECTION_ORDERS_SOURCE ?= orders_source.duckdb
export DPONE_CONNECTION_FLOW_LAKE ?= flow_lake.duckdb

# The suite runs on PYTEST_WORKERS pytest-xdist workers (2 cores in CI; 0 = one process).
# tests/conftest.py puts every test using one expensive session fixture (webserver, release run, built
# lake, real compile) on one worker, each other file on one worker, and hands the longest groups out first.
PYTEST_WORKERS ?= 2

.PHONY: install demo test test-all lint regen check-generated dev bench screenshots check-defs clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,screenshots]'
	@touch $(STAMP)

# The package's bytecode, written where missing or stale before every target that starts Python processes,
# as pip writes it for an installed wheel: with PYTHONDONTWRITEBYTECODE set (these machines set it), each
# process of an editable checkout would otherwise compile the package from source (~0.3 s for the definitions).
BYTECODE = $(BIN)/python -m compileall -q -j 0 dpone_dagster bench >/dev/null

install: $(STAMP)

demo: $(STAMP)
	$(BYTECODE)
	$(BIN)/dpone demo

# `make test` (what CI runs): every test but the long scenarios (`slow`), of which it keeps at least one
# of each kind (tests/conftest.py CI_KEEPS_SLOW): 1981 tests in 6.5 min on 2 cores in a fresh clone on a
# quiet machine (2026-12-02 at 3ffae2c; 13.7-17 min for the code of the day before; the likely cause, not
# measured apart, is the pre-imported dbt in the run processes tests start); 1982 in 9.1 min on 2026-12-06
# (cfe3781) on a machine where every timed dbt command ran ~30% slower. `make test-all`: every test.
test: $(STAMP)
	$(BYTECODE)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow or ci"; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

test-all: $(STAMP)
	$(BYTECODE)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# ruff, configured in pyproject.toml ([tool.ruff*]): E, F, I, W (lines at most 120 characters), pandas
# banned, module-level duckdb/dbt banned in the package outside the modules whose job they are; and every
# Python file as `ruff format` writes it (run `.venv/bin/ruff format .` to fix a failing check).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Every generated file (contract vectors, docs/authority.md schema reference, docs/errors.md, flow
# packs, definitions snapshot, real release golden tree): devtools/regen.py. Review the diff after
# `make regen`; `make check-generated` writes nothing and fails naming each stale file.
regen: $(STAMP)
	$(BIN)/python -m devtools.regen

check-generated: $(STAMP)
	$(BIN)/python -m devtools.regen --check

dev: $(STAMP)
	$(BIN)/dpone prepare
	$(BIN)/dpone dev

check-defs: $(STAMP)
	$(BIN)/dagster definitions validate -w workspace.yaml

# `make bench` also measures SQLMesh's `plan dev` beside the peer rows (bench/bench_peers.py) from a venv of
# its own, built once from bench/sqlmesh-requirements.txt; where it cannot be installed the row says so.
SQLMESH_VENV := .venv-sqlmesh
bench: $(STAMP)
	@test -x $(SQLMESH_VENV)/bin/sqlmesh || { $(PYTHON) -m venv $(SQLMESH_VENV) && $(SQLMESH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/sqlmesh-requirements.txt; } || echo "SQLMesh could not be installed: its bench rows say not measured"
	DPONE_BENCH_SQLMESH="$${DPONE_BENCH_SQLMESH:-$(CURDIR)/$(SQLMESH_VENV)/bin/sqlmesh}" $(BIN)/python -m bench

screenshots: $(STAMP)
	$(BIN)/python -m bench.screenshots

clean:
	rm -rf .dpone dbt_project_synthetic/target
