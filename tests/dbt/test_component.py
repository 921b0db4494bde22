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
NUMBERS, PARITY, SUMMARY = (AssetKey(["main", "tiny", name]) for name in ("tiny_numbers", "tiny_parity", "tiny_summary"))


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
    return {e.asset_check_key.name: e.passed for e in (ev.event_specific_data for ev in result.all_events if ev.event_type_value == "ASSET_CHECK_EVALUATION")}


@pytest.mark.slow
def test_the_tiny_project_materializes_in_a_fork_through_the_component_with_defer(tiny_project, tmp_path, monkeypatch):
    setup = LakeSetup(tmp_path / "state")
    with setup.applied(), create_defs_folder_sandbox() as sandbox:
        defs_path = sandbox.scaffold_component(
            component_cls=ForkAwareDbtProjectComponent, defs_path="tiny_dbt", scaffold_params={"project_path": str(tiny_project)}
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
        kinds = dict(conn.execute(
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_catalog = 'lake_main' AND table_schema = 'tiny'"
        ).fetchall())
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


def test_the_tiny_project_merges_with_the_lake_domain_and_is_observed(tiny_project, tmp_path):
    """A team's code location: its dbt project plus dpone's lake domain (jobs, sensors, `ducklake`)."""
    from dagster import Definitions

    from dpone_dagster.defs import lake
    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions
    from dpone_dagster.integration.lake.observations import ducklake_asset_keys

    with LakeSetup(tmp_path / "state").applied():
        tiny = fork_aware_dbt_definitions(project_dir=tiny_project, dbt_resource_key="tiny_dbt")
        location = Definitions.merge(tiny, lake.defs)
    repository = location.get_repository_def()
    assert {NUMBERS, PARITY, SUMMARY} <= set(ducklake_asset_keys(repository))
    assert repository.get_job("fork_state_observation_job") is not None
    assert {"tiny_dbt", "ducklake"} <= set(repository.get_top_level_resources())
