"""Fixed costs of a one-model fork run that must not come back (see `integration/dbt/cli.py`).

- the dbt resource answers its CLI version without running `dbt --version` (a whole dbt start-up)
  when its executable is the venv's dbt, and still asks any other executable;
- it builds no in-process dbt adapter before `dbt build` (profile, project, base macros);
- the dagster-dbt private members it overrides still exist (an upgrade renaming them would bring the
  costs back silently).
"""

from __future__ import annotations

import dagster_dbt.core.resource as dagster_dbt_resource
import pytest
from dagster_dbt import DbtCliResource
from dagster_dbt.compat import DBT_PYTHON_VERSION
from packaging import version

from dpone_dagster.integration.dbt.cli import InstalledDbtCliResource, is_installed_dbt
from dpone_dagster.integration.dbt.project import configured_dbt_project, dbt_executable


def _resource(executable: str | None = None) -> DbtCliResource:
    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_resource

    if executable is not None:
        return InstalledDbtCliResource(project_dir=configured_dbt_project(), dbt_executable=executable)
    return fork_aware_dbt_resource(configured_dbt_project()).resource_fn(None)


def test_the_dbt_resource_never_runs_dbt_version_for_the_venvs_dbt(monkeypatch):
    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"dbt --version ran: {args}")

    monkeypatch.setattr(dagster_dbt_resource, "check_output", no_subprocess)
    resource = _resource()
    assert is_installed_dbt(resource.dbt_executable)
    assert resource._cli_version == DBT_PYTHON_VERSION


def test_another_dbt_executable_is_still_asked_its_version(monkeypatch, tmp_path):
    other = tmp_path / "dbt"
    other.write_text("#!/bin/sh\necho 'Core: 2.0.0-beta'\n")
    other.chmod(0o755)
    asked: list[list[str]] = []

    def fake_check_output(args, *rest, **kwargs):
        asked.append(list(args))
        return b"dbt-fusion 2.0.0-beta.1"

    monkeypatch.setattr(dagster_dbt_resource, "check_output", fake_check_output)
    resource = _resource(str(other))
    assert not is_installed_dbt(str(other))
    assert resource._cli_version == version.parse("2.0.0")
    assert asked == [[str(other), "--version"]]


def test_the_dbt_resource_builds_no_in_process_adapter(monkeypatch):
    import dbt.adapters.factory

    def no_adapter(*args, **kwargs):
        raise AssertionError("a dbt adapter was registered in the run worker")

    monkeypatch.setattr(dbt.adapters.factory, "register_adapter", no_adapter)
    resource = _resource()
    assert resource._initialize_dbt_core_adapter(["build"]) is None


def test_the_overridden_dagster_dbt_members_still_exist():
    assert isinstance(
        DbtCliResource.__dict__.get("_cli_version"), type(InstalledDbtCliResource.__dict__["_cli_version"])
    )
    assert callable(DbtCliResource.__dict__.get("_initialize_dbt_core_adapter"))
    assert dbt_executable()  # the venv's dbt the resource is given


@pytest.mark.parametrize("executable", ["/elsewhere/bin/dbt"])
def test_only_the_dbt_beside_the_interpreter_counts_as_installed(executable):
    assert not is_installed_dbt(executable)
