"""Issue 18: the dependency ranges pyproject.toml declares are the tested ones, and the dbt SQL guard
supports exactly the declared dbt-duckdb range (refusing every other release with its own code).

What a reader could get wrong: the slow part (the adoption flow on the lowest and highest versions)
is tests/adoption/test_wheel_adoption.py; this file keeps the declarations and the gate in step.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from dpone_dagster.lake import dbt_plugin

REPO_ROOT = Path(__file__).resolve().parents[2]
RANGED = ("dagster", "dagster-dbt", "dbt-core", "dbt-duckdb", "duckdb", "duckdb-extension-ducklake")
# Published dbt-duckdb releases around the range (PyPI, checked when the range was set).
DBT_DUCKDB_RELEASES = ("1.9.6", "1.10.0", "1.10.1", "1.11.0", "1.11.1", "1.11.2", "1.12.0")


def _declared() -> dict[str, Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return {req.name: req for req in map(Requirement, project["dependencies"])}


def _lowest() -> dict[str, str]:
    lines = (Path(__file__).with_name("lowest-versions.txt")).read_text().splitlines()
    pins = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {req.name: str(req.specifier).removeprefix("==") for req in pins}


def test_the_core_dependencies_are_ranges_not_pins() -> None:
    declared = _declared()
    for name in RANGED:
        operators = {spec.operator for spec in declared[name].specifier}
        assert operators == {">=", "<"}, f"{name}: {declared[name]}"


def test_the_lowest_versions_file_is_each_range_lower_bound() -> None:
    declared, lowest = _declared(), _lowest()
    for name, req in declared.items():
        lower = [spec.version for spec in req.specifier if spec.operator in (">=", "==")]
        if lower:  # a range's lower bound, or an exact pin (the lowest venv must hold every dependency)
            assert lowest.get(name) == lower[0], f"{name}: lowest-versions.txt says {lowest.get(name)}, pyproject {req}"


def test_the_declared_dbt_duckdb_range_is_exactly_what_the_guard_supports() -> None:
    specifier = _declared()["dbt-duckdb"].specifier
    admitted = tuple(v for v in DBT_DUCKDB_RELEASES if specifier.contains(v))
    assert admitted == dbt_plugin.GUARDED_DBT_DUCKDB


@pytest.fixture
def cursor_wrapper_restored():
    from dbt.adapters.duckdb.environments import local

    init, guarded = local.DuckDBCursorWrapper.__init__, getattr(local.DuckDBCursorWrapper, "_dpone_guarded", False)
    yield
    local.DuckDBCursorWrapper.__init__ = init
    if guarded:
        local.DuckDBCursorWrapper._dpone_guarded = True
    elif "_dpone_guarded" in vars(local.DuckDBCursorWrapper):
        del local.DuckDBCursorWrapper._dpone_guarded


@pytest.mark.parametrize("version", DBT_DUCKDB_RELEASES)
def test_the_guard_starts_on_each_supported_release_and_refuses_the_others(
    version, cursor_wrapper_restored, monkeypatch
) -> None:
    import dbt.adapters.duckdb.__version__ as version_module

    monkeypatch.setattr(version_module, "version", version)
    if version in dbt_plugin.GUARDED_DBT_DUCKDB:
        dbt_plugin.install_cursor_guard()
        return
    with pytest.raises(dbt_plugin.DbtDuckdbUnsupportedError) as refused:
        dbt_plugin.install_cursor_guard()
    assert refused.value.code == "lake.dbt_duckdb_unsupported"
    assert version in refused.value.message and "1.11.1" in refused.value.message
