"""A second dbt project (tests/fixtures/dbt_tiny) through the component and the factory, prod then a fork with defer.

The tiny project shares nothing with dbt_project_synthetic but the dpone plugin in its profile.
It is scaffolded the way `dg scaffold defs` does it, loaded as a component, materialized in `prod`,
then a fork of prod materializes only the two downstream models: they read `tiny_numbers`
through the defer view from prod (the fork never built it), and prod's tables are untouched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, materialize
from dagster.components.testing import create_defs_folder_sandbox
from dbt_lakes import LakeSetup

from dpone_dagster.config import load_config
from dpone_dagster.integration.dbt.component import ForkAwareDbtProjectComponent
from dpone_dagster.integration.dbt.factory import fork_aware_dbt_assets
from dpone_dagster.integration.dbt.project import DbtProjectError
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.table_states import lake_table_states
from dpone_dagster.workspaces.service import Workspaces

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dbt_tiny"
FORK = "tiny-fork"
NUMBERS, PARITY, SUMMARY = (
    AssetKey(["main", "tiny", name]) for name in ("tiny_numbers", "tiny_parity", "tiny_summary")
)


@pytest.fixture
def tiny_project(tmp_path) -> Path:
    """A copy of the fixture project (dbt writes target/ beside it)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "dbt_tiny"))


def _materializations(result) -> dict[AssetKey, dict[str, object]]:
    return {
        e.asset_key: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }


def _checks(result) -> dict[str, bool]:
    return {
        e.asset_check_key.name: e.passed
        for e in (ev.event_specific_data for ev in result.all_events if ev.event_type_value == "ASSET_CHECK_EVALUATION")
    }


@pytest.mark.slow
def test_the_tiny_project_materializes_in_a_fork_through_the_component_with_defer(tiny_project, tmp_path, monkeypatch):
    setup = LakeSetup(tmp_path / "state")
    with setup.applied(), create_defs_folder_sandbox() as sandbox:
        defs_path = sandbox.scaffold_component(
            component_cls=ForkAwareDbtProjectComponent,
            defs_path="tiny_dbt",
            scaffold_params={"project_path": str(tiny_project)},
        )
        written = yaml.safe_load((defs_path / "defs.yaml").read_text())
        assert written["type"] == "dpone_dagster.integration.dbt.component.ForkAwareDbtProjectComponent"
        assert written["attributes"]["project_dir"].startswith("{{ context.project_root }}/")
        with sandbox.load_component_and_build_defs(defs_path=defs_path) as (component, defs):
            assert isinstance(component, ForkAwareDbtProjectComponent)
            assets = list(defs.assets or [])
            resources = dict(defs.resources or {})
            assert {"dbt", "ducklake"} <= set(resources)
            keys = {key for a in assets for key in a.keys}
            assert keys == {NUMBERS, PARITY, SUMMARY}

            prod = materialize(assets, resources=resources, raise_on_error=False)
            assert prod.success
            assert _materializations(prod)[NUMBERS]["fork_state"] == "own"
            assert all(_checks(prod).values()) and len(_checks(prod)) == 5

            prod_before = _prod_snapshot(setup)
            Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
            monkeypatch.setenv("DPONE_WORKSPACE", FORK)
            fork = materialize(assets, resources=resources, selection=[PARITY, SUMMARY], raise_on_error=False)
            assert fork.success
            built = _materializations(fork)
            assert set(built) == {PARITY, SUMMARY}
            assert built[SUMMARY]["workspace"] == FORK and built[SUMMARY]["fork_state"] == "fork_materialized"
            assert built[SUMMARY]["namespace"] != "(root)"
            checks = _checks(fork)
            assert checks and all(checks.values()) and not any("tiny_numbers" in name for name in checks)

    states = lake_table_states(FORK, "main", setup.config())
    numbers = states.of(TableName("tiny", "tiny_numbers")).state
    assert (numbers.state, numbers.owner) == ("deferred", "prod")
    assert states.of(TableName("tiny", "tiny_summary")).state.state == "fork_materialized"
    assert _prod_snapshot(setup) == prod_before, "the fork's dbt run wrote to prod"
    conn = setup.connect(workspace=FORK)
    try:
        kinds = dict(
            conn.execute(
                "SELECT table_name, table_type FROM information_schema.tables "
                "WHERE table_catalog = 'lake_main' AND table_schema = 'tiny'"
            ).fetchall()
        )
        assert kinds == {"tiny_numbers": "VIEW", "tiny_parity": "BASE TABLE", "tiny_summary": "BASE TABLE"}
        # the fork never built tiny_numbers: its parity/summary rows came through the defer view
        assert conn.execute("SELECT numbers, total FROM lake_main.tiny.tiny_summary").fetchall() == [(6, 15)]
    finally:
        conn.close()


def _prod_snapshot(setup: LakeSetup) -> int:
    conn = setup.connect()
    try:
        return conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()[0]
    finally:
        conn.close()


def test_a_profile_without_the_dpone_plugin_is_refused(tiny_project):
    profiles = yaml.safe_load((tiny_project / "profiles.yml").read_text())
    profiles["dbt_tiny"]["outputs"]["lake"].pop("plugins")
    (tiny_project / "profiles.yml").write_text(yaml.safe_dump(profiles))
    with pytest.raises(DbtProjectError) as refused:
        fork_aware_dbt_assets(project_dir=tiny_project, prepare=False)
    assert refused.value.code == "dbt.profile_not_fork_aware"


def test_a_profile_for_another_lake_is_refused(tiny_project):
    with pytest.raises(DbtProjectError) as refused:
        fork_aware_dbt_assets(project_dir=tiny_project, lake="other", prepare=False)
    assert refused.value.code == "dbt.profile_not_fork_aware"


def test_the_factory_keys_the_tiny_project_by_lake_schema_table(tiny_project, tmp_path):
    with LakeSetup(tmp_path / "state").applied():
        assets = fork_aware_dbt_assets(project_dir=tiny_project, group_name="tiny")
    assert set(assets.keys) == {NUMBERS, PARITY, SUMMARY}
    assert {assets.group_names_by_key[k] for k in assets.keys} == {"tiny"}
    assert assets.op.name == "dbt_tiny_dbt_build" and assets.required_resource_keys >= {"dbt", "ducklake"}
    assert all("ducklake" in spec.kinds for spec in assets.specs)


LAKE_JOBS = {
    "create_fork_job",
    "drop_fork_job",
    "promote_fork_job",
    "fork_state_observation_job",
    "lake_maintenance_job",
    "fork_janitor_job",
}
LAKE_SENSORS = {"fork_state_sensor", "fork_janitor_sensor"}


def _location(defs):
    """What a code location made of `defs` serves: jobs, sensors, schedules, resources, checks, executor."""
    repository = defs.get_repository_def()
    checks = {(c.asset_key, c.name) for c in defs.resolve_asset_graph().asset_check_keys}
    return {
        "jobs": {j.name for j in repository.get_all_jobs() if not j.name.startswith("__")},
        "sensors": {s.name for s in repository.sensor_defs},
        "schedules": {s.name for s in repository.schedule_defs},
        "resources": set(repository.get_top_level_resources()),
        "checks": checks,
        "executor": defs.executor,
    }


def test_the_factory_gives_everything_the_location_has_for_its_dbt_project(tiny_project, tmp_path):
    """One call: assets, dbt tests, fork_staleness and diff_against_parent, the lake jobs, sensors,
    schedule, the `ducklake` and `dbt` resources and the workspace-binding executor."""
    from dpone_dagster.integration.binding import DEFAULT_EXECUTOR
    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions

    with LakeSetup(tmp_path / "state").applied():
        got = _location(fork_aware_dbt_definitions(project_dir=tiny_project))
    assert got["jobs"] == LAKE_JOBS
    assert got["sensors"] == LAKE_SENSORS
    assert got["schedules"] == {"lake_maintenance_schedule"}
    assert {"dbt", "ducklake"} == got["resources"]
    assert got["executor"] is DEFAULT_EXECUTOR
    for key in (NUMBERS, PARITY, SUMMARY):
        assert {(key, "fork_staleness"), (key, "diff_against_parent")} <= got["checks"]
    assert len({name for _, name in got["checks"]} - {"fork_staleness", "diff_against_parent"}) == 5  # dbt tests


def test_the_component_gives_what_the_factory_gives(tiny_project, tmp_path):
    with LakeSetup(tmp_path / "state").applied(), create_defs_folder_sandbox() as sandbox:
        defs_path = sandbox.scaffold_component(
            component_cls=ForkAwareDbtProjectComponent,
            defs_path="tiny_dbt",
            scaffold_params={"project_path": str(tiny_project)},
        )
        with sandbox.load_component_and_build_defs(defs_path=defs_path) as (_component, defs):
            from_component = _location(defs)
        from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions

        from_factory = _location(fork_aware_dbt_definitions(project_dir=tiny_project))
    assert from_component == from_factory


def test_two_projects_and_the_lake_domain_merge_into_one_location(tiny_project, tmp_path):
    """A team's code location: two dbt projects (two resource keys, two op names) plus dpone's lake
    domain; the lake objects are the same objects everywhere, so nothing is defined twice."""
    from dagster import Definitions

    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions
    from dpone_dagster.integration.lake.definitions import fork_lake_definitions
    from dpone_dagster.integration.lake.observations import ducklake_asset_keys

    second = Path(shutil.copytree(tiny_project, tmp_path / "dbt_tiny_two"))
    with LakeSetup(tmp_path / "state").applied():
        one = fork_aware_dbt_definitions(project_dir=tiny_project, dbt_resource_key="tiny_dbt", exclude="tiny_numbers")
        two = fork_aware_dbt_definitions(
            project_dir=second, dbt_resource_key="tiny_two_dbt", name="tiny_two", select="tiny_numbers"
        )
        location = Definitions.merge(one, two, fork_lake_definitions())
        got = _location(location)
    repository = location.get_repository_def()
    assert set(ducklake_asset_keys(repository)) == {NUMBERS, PARITY, SUMMARY}
    assert {(k, "fork_staleness") for k in (NUMBERS, PARITY, SUMMARY)} <= got["checks"]
    assert got["jobs"] == LAKE_JOBS and got["sensors"] == LAKE_SENSORS
    assert {"tiny_dbt", "tiny_two_dbt", "ducklake"} == got["resources"]
