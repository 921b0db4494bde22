"""The release flow through the real webserver: graph, release run, registry, sensor, dormant tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from defs_release.test_definitions import LINEAGE

from bench.screenshots import DEPLOYMENT_LOCATION, RELEASE_JOB, RELEASE_LOCATION, dormant_jobs
from tests.synthetic_project import NATIVE_MODELS, ORDINARY_FLOWS, PRE_HOOKS

STAGE_EDGES = LINEAGE
ASSET_NODES = """
{ assetNodes { assetKey { path } groupName dependencyKeys { path } } }
"""
SENSOR_TARGETS = """
query($selector: SensorSelector!) { sensorOrError(sensorSelector: $selector) {
    __typename ... on Sensor { targets { pipelineName } } } }
"""


def _materialized(details: dict) -> dict[str, dict]:
    out = {}
    for event in details["events"]:
        if event["__typename"] == "MaterializationEvent":
            entries = {}
            for entry in event["metadataEntries"]:
                entries[entry["label"]] = entry.get("text", entry.get("intValue", entry.get("boolValue")))
            out["/".join(event["assetKey"]["path"])] = entries
    return out


def test_release_group_has_the_six_stages_in_lineage_order(webserver):
    nodes = webserver.graphql(ASSET_NODES)["assetNodes"]
    release = {
        "/".join(n["assetKey"]["path"]): {"/".join(d["path"]) for d in n["dependencyKeys"]}
        for n in nodes
        if n["groupName"] == "release"
    }
    assert release == STAGE_EDGES


def test_release_job_publishes_and_installs(webserver, released_through_ui, ui_state_dir: Path):
    details = webserver.run_details(released_through_ui)
    assert details["status"] == "SUCCESS"
    found = _materialized(details)
    assert set(found) == set(STAGE_EDGES)
    release_id = found["published_release"]["release_id"]
    registry = ui_state_dir / "release" / "registry" / "releases" / f"{release_id.removeprefix('sha256:')}.json"
    assert registry.is_file()
    assert json.loads(registry.read_bytes())["release_id"] == release_id
    pointer = json.loads((ui_state_dir / "release" / "cache" / "synthetic-dev" / "current").read_bytes())
    assert pointer["release_id"] == release_id == found["installed_release"]["release_id"]


def test_grant_sensor_requests_a_release_run_then_skips(webserver, released_through_ui):
    sensor = webserver.graphql(
        SENSOR_TARGETS,
        {
            "selector": {
                "repositoryLocationName": RELEASE_LOCATION,
                "repositoryName": "__repository__",
                "sensorName": "release_inputs_sensor",
            }
        },
    )
    assert [t["pipelineName"] for t in sensor["sensorOrError"]["targets"]] == [RELEASE_JOB]
    first = webserver.sensor_dry_run(RELEASE_LOCATION, "release_inputs_sensor")
    assert first["error"] is None
    assert len(first["runRequests"]) == 1
    assert first["runRequests"][0]["jobName"] in (None, RELEASE_JOB)
    tags = {tag["key"]: tag["value"] for tag in first["runRequests"][0]["tags"]}
    assert tags["dpone/grant_digest"].startswith("sha256:")
    second = webserver.sensor_dry_run(RELEASE_LOCATION, "release_inputs_sensor", cursor=first["cursor"])
    assert second["runRequests"] == []
    assert "unchanged since the last requested release run" in second["skipReason"]


def test_launching_a_dormant_task_is_refused_with_zero_credential_resolutions(
    webserver, refused_task_run, ui_state_dir
):
    kinds = dormant_jobs(webserver)
    assert {kind: len(names) for kind, names in kinds.items()} == {
        "native": NATIVE_MODELS,
        "ordinary": ORDINARY_FLOWS,
        "pre_hook": PRE_HOOKS,
    }

    _, run_id = refused_task_run
    assert webserver.wait_for_run(run_id) == "FAILURE"
    details = webserver.run_details(run_id)
    assert details["tags"]["dpone/admission"] == "denied"
    assert details["tags"]["dpone/denial_reason"] == "admission.development_dormant"
    assert details["tags"]["dpone/release_id"].startswith("sha256:")
    failure = next(e for e in details["events"] if e["__typename"] == "ExecutionStepFailureEvent")
    assert "[release.execution_denied]" in failure["error"]["message"]
    metadata = {m["label"]: m.get("intValue", m.get("text")) for m in failure["failureMetadata"]["metadataEntries"]}
    assert metadata["credential_resolutions"] == 0
    ledger = ui_state_dir / "release" / "runtime_access.jsonl"
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    assert [line for line in lines if json.loads(line)["run_id"] == run_id] == []


def test_an_altered_installed_release_is_not_loaded_and_says_why(webserver, released_through_ui, ui_state_dir):
    deployments = ui_state_dir / "release" / "cache" / "synthetic-dev" / "deployments"
    victim = next(p for p in sorted(next(deployments.iterdir()).rglob("*.sql")))
    original = victim.read_bytes()
    victim.write_bytes(original + b"-- altered\n")
    try:
        entry = webserver.reload_location(DEPLOYMENT_LOCATION)
        error = entry["locationOrLoadError"]
        assert error["__typename"] == "PythonError"
        shown = " ".join([error["message"], *(link["error"]["message"] for link in error["errorChain"])])
        assert "[deployment.integrity_failed]" in shown
        assert "release.integrity_mismatch" in shown
        assert str(ui_state_dir) not in shown
    finally:
        victim.write_bytes(original)
        restored = webserver.reload_location(DEPLOYMENT_LOCATION)
    assert restored["locationOrLoadError"]["__typename"] == "RepositoryLocation"


@pytest.mark.slow  # a second release run launched from the UI (~40 s)
def test_materialize_all_on_the_release_group_is_the_release_job_run(webserver, released_through_ui):
    """The UI's "Materialize all" on group `release` (the implicit asset job, launched through GraphQL):
    one process, tagged `dpone/release`, nothing pickled into DAGSTER_HOME, no `path` metadata."""
    run_id = webserver.launch_assets(RELEASE_LOCATION, [[stage] for stage in sorted(STAGE_EDGES)])
    status = webserver.wait_for_run(run_id, timeout=600)
    details = webserver.run_details(run_id)
    assert status == "SUCCESS", details["events"][-5:]
    assert details["tags"]["dpone/release"] == "true"
    assert "dpone/workspace" in details["tags"]
    messages = [event.get("message") or "" for event in details["events"]]
    assert any(m.startswith("Executing steps in process") for m in messages)
    assert not any("multiprocess executor" in m for m in messages)
    found = _materialized(details)
    assert set(found) == set(STAGE_EDGES)
    assert all("path" not in metadata for metadata in found.values())
    assert (found["published_release"]["action"], found["installed_release"]["action"]) == (
        "already_published",
        "already_active",
    )
    home = webserver.log_path.parent  # the session's DAGSTER_HOME
    assert (home / "storage").is_dir()
    stored = [
        p for p in (home / "storage").rglob("*") if p.is_file() and set(p.relative_to(home).parts) & set(STAGE_EDGES)
    ]
    assert stored == []
