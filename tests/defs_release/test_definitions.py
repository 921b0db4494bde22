"""The release domain's definitions: keys, lineage, checks, job, sensors and resources, as a snapshot.

An accidental change to the graph shows up here in review.
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.config import load_config
from dpone_dagster.defs.release.definitions import build_definitions
from dpone_dagster.defs.release.resources import RESOURCE_KEYS
from dpone_dagster.defs.release.stage_values import IO_MANAGER_KEY as STAGE_VALUES_KEY
from dpone_dagster.release.platform.settings import release_settings

LINEAGE = {
    "development_policy": set(),
    "development_grant": {"development_policy"},
    "native_workspace": {"development_grant"},
    "ordinary_flows": {"development_grant"},
    "development_release": {"native_workspace", "ordinary_flows"},
    "published_release": {"development_release"},
    "installed_release": {"published_release"},
}
CHECKS = {
    ("development_policy", "policy_matches_pinned_digest"): True,
    ("development_grant", "grant_verified"): True,
    ("published_release", "rollout_gate"): True,
    ("installed_release", "tasks_denied_before_credentials"): False,
}


def _defs() -> dg.Definitions:
    return build_definitions(release_settings(load_config()))


def test_release_group_lineage_snapshot():
    graph = _defs().resolve_asset_graph()
    lineage = {
        key.to_user_string(): {parent.to_user_string() for parent in graph.get(key).parent_keys}
        for key in graph.get_all_asset_keys()
    }
    assert lineage == LINEAGE
    assert {graph.get(key).group_name for key in graph.get_all_asset_keys()} == {"release"}


def test_checks_and_their_blocking_flags():
    defs = _defs()
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec.blocking
        for checks in defs.asset_checks
        for spec in checks.check_specs
    }
    assert specs == CHECKS


def test_release_job_selects_the_whole_group_and_sensors_are_wired():
    defs = _defs()
    job = defs.resolve_job_def("release_job")
    assert {key.to_user_string() for key in job.asset_layer.selected_asset_keys} == set(LINEAGE)
    sensors = {sensor.name: sensor for sensor in defs.sensors}
    assert set(sensors) == {"release_inputs_sensor", "revocation_sensor"}
    assert sensors["release_inputs_sensor"].job_name == "release_job"
    assert sensors["release_inputs_sensor"].default_status == dg.DefaultSensorStatus.STOPPED
    assert sensors["revocation_sensor"].default_status == dg.DefaultSensorStatus.RUNNING


def test_resources_refuse_run_configuration():
    """A launchpad user must not be able to override the pinned digest, target or registry."""
    resources = _defs().resources
    assert set(resources) == RESOURCE_KEYS | {STAGE_VALUES_KEY}  # the stage values' IO manager: no config either

    @dg.asset(required_resource_keys=set(RESOURCE_KEYS))
    def probe(context) -> str:
        return context.resources.authority_platform.settings.protected_target_file.name

    assert dg.materialize([probe], resources=resources).output_for_node("probe") == "target.json"
    for key in sorted(resources):
        override = {"resources": {key: {"config": {"protected_target_file": "/tmp/elsewhere.json"}}}}
        try:
            dg.materialize([probe], resources=resources, run_config=override)
        except dg.DagsterInvalidConfigError:
            continue
        raise AssertionError(f"run config was accepted for resource {key}")


def test_settings_are_read_when_definitions_are_built_not_when_modules_are_imported(tmp_path, monkeypatch):
    """A module imported under one environment must not pin another test's (or tool's) state."""
    import dpone_dagster.defs.release.definitions as release_definitions
    import dpone_dagster.deployment.location as deployment_location

    monkeypatch.setenv("DPONE_STATE_DIR", str(tmp_path / "later"))
    defs = release_definitions.location_definitions()
    platform = defs.resources["authority_platform"].resource_fn(None)
    assert platform.settings.protected_target_file.is_relative_to(tmp_path / "later")
    assert not hasattr(release_definitions, "defs") and not hasattr(deployment_location, "defs")
