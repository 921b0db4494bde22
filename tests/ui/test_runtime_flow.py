"""The standard runtime through the real webserver: on one deployment, a GraphQL `launchRun` of a
synthetic-family task runs it (credential resolutions > 0) and of a development task is refused (0)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from bench.screenshots import DEPLOYMENT_LOCATION, dormant_jobs

STEP_OUTPUT_METADATA = """
query($runId: ID!) { logsForRun(runId: $runId, limit: 1000) { __typename ... on EventConnection { events {
    __typename ... on ExecutionStepOutputEvent { metadataEntries { label
        ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text } } } } } } }
"""


def _ledger(ui_state_dir: Path, run_id: str) -> list[str]:
    ledger = ui_state_dir / "release" / "runtime_access.jsonl"
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    return [row["port"] for row in map(json.loads, lines) if row["run_id"] == run_id]


def test_graphql_launches_run_synthetic_tasks_and_refuse_development_tasks(
    webserver, released_through_ui, ui_state_dir
):
    synthetic = dormant_jobs(webserver, family="synthetic")
    assert {kind: len(names) for kind, names in synthetic.items()} == {"ordinary": 3, "pre_hook": 3}
    job = "synthetic__ordinary__customer_order_counts"
    assert job in synthetic["ordinary"]

    ran = webserver.launch_job(DEPLOYMENT_LOCATION, job)
    assert webserver.wait_for_run(ran) == "SUCCESS", webserver.run_details(ran)["events"][-5:]
    details = webserver.run_details(ran)
    assert details["tags"]["dpone/admission"] == "admitted"
    assert int(details["tags"]["dpone/credential_resolutions"]) == 2
    events = webserver.graphql(STEP_OUTPUT_METADATA, {"runId": ran})["logsForRun"]["events"]
    output = next(e for e in events if e["__typename"] == "ExecutionStepOutputEvent")
    metadata = {m["label"]: m.get("intValue", m.get("text")) for m in output["metadataEntries"]}
    assert metadata["credential_resolutions"] == 2
    assert metadata["rows: flow_marts.customer_order_counts"] > 0
    assert _ledger(ui_state_dir, ran) == ["init_fetch", "credentials", "credentials", "source", "writer"]
    lake = ui_state_dir / "release" / "synthetic_runtime" / "lake" / "flow_lake.duckdb"
    with duckdb.connect(str(lake), read_only=True) as conn:
        assert conn.execute("select count(*) from flow_marts.customer_order_counts").fetchone()[0] > 0

    development = dormant_jobs(webserver)["ordinary"][0]
    refused = webserver.launch_job(DEPLOYMENT_LOCATION, development)
    assert webserver.wait_for_run(refused) == "FAILURE"
    details = webserver.run_details(refused)
    assert details["tags"]["dpone/admission"] == "denied"
    assert details["tags"]["dpone/denial_reason"] == "admission.development_dormant"
    failure = next(e for e in details["events"] if e["__typename"] == "ExecutionStepFailureEvent")
    assert "[release.execution_denied]" in failure["error"]["message"]
    metadata = {m["label"]: m.get("intValue", m.get("text")) for m in failure["failureMetadata"]["metadataEntries"]}
    assert metadata["credential_resolutions"] == 0 and metadata["runtime_port_uses"] == 0
    assert _ledger(ui_state_dir, refused) == []
