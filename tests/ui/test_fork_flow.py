"""The same flow in a fork, through the session's fork webserver (`fork_webserver`, `DPONE_WORKSPACE=wm-fork-ui`).

The session webserver (workspace `prod`) materializes the dbt group (`prod_dbt_run`); the fork is
created with the CLI; the fork's webserver materializes one model. Its materialization says
`fork_materialized` in the fork's namespace, the parent's says `own`, and the fork's status shows
the model's upstream tables deferred to `prod`. What the UI shows for it, read through GraphQL: the
graph's kinds (`ducklake`, `fork`; never a state, which would go stale), the observation job's
observations, and the fork sensor's tick (reports once, then skips until an ancestor materializes);
in `prod` the sensor skips as "not a fork". The fork and its webserver are shared with the other
fork tests, so assertions name this test's model and run ids, never totals.
"""

from __future__ import annotations

import json
import re

import pytest

from bench.screenshots import RELEASE_LOCATION

from .conftest import UI_FORK, dpone, ui_env

FORK = UI_FORK
MODEL = ["main", "marts", "fct_orders"]
UPSTREAM = ["main", "staging", "stg_orders"]
OBSERVATION_JOB = "fork_state_observation_job"
FORK_SENSOR = "fork_state_sensor"

_ASSET_TAGS = """
{ assetNodes(group: {groupName: "synthetic_dbt", repositoryName: "__repository__",
    repositoryLocationName: "dpone_dagster"}) { assetKey { path } kinds tags { key value } } }
"""

_LATEST_OBSERVATION = """
query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { __typename
    ... on Asset { assetObservations(limit: 1) { runId metadataEntries { label
        ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } } } } }
"""


def _graph_badges(server) -> dict[str, tuple[dict[str, str], set[str]]]:
    """Per dbt asset: its tags and kinds, as the asset graph shows them."""
    return {
        "/".join(node["assetKey"]["path"]): ({t["key"]: t["value"] for t in node["tags"]}, set(node["kinds"]))
        for node in server.graphql(_ASSET_TAGS)["assetNodes"]
    }


def _latest_observation(server, key: list[str]) -> tuple[str, dict]:
    asset = server.graphql(_LATEST_OBSERVATION, {"key": {"path": key}})["assetOrError"]
    [observation] = asset["assetObservations"]
    entries = {e["label"]: e.get("text", e.get("intValue")) for e in observation["metadataEntries"]}
    return observation["runId"], entries


def _materialized(webserver, run_id: str) -> dict[str, dict]:
    out = {}
    for event in webserver.run_details(run_id)["events"]:
        if event["__typename"] == "MaterializationEvent":
            out["/".join(event["assetKey"]["path"])] = {
                entry["label"]: entry.get("text", entry.get("intValue")) for entry in event["metadataEntries"]
            }
    return out


def _failures(server, run_id: str) -> list[str]:
    events = server.run_details(run_id)["events"]
    return [e.get("message") or str(e.get("error")) for e in events if "Failure" in e["__typename"]][-5:]


@pytest.mark.slow  # a fork webserver and a fork run through the UI (~1-2 min)
def test_a_fork_materializes_one_model_and_defers_the_rest(webserver, prod_dbt_run, fork_webserver, ui_state_dir):
    parent = _materialized(webserver, prod_dbt_run)
    assert parent["main/marts/fct_orders"]["fork_state"] == "own"
    env = ui_env(ui_state_dir)
    fork_server = fork_webserver

    before = _graph_badges(fork_server)
    assert {"ducklake", "fork"} <= before["/".join(MODEL)][1]
    assert before["/".join(MODEL)][0]["dpone/workspace"] == FORK

    fork_run = fork_server.launch_assets(RELEASE_LOCATION, [MODEL])
    assert fork_server.wait_for_run(fork_run, timeout=600) == "SUCCESS", _failures(fork_server, fork_run)
    fork = _materialized(fork_server, fork_run)

    # No definition-time state to go stale: the graph reads the same before and after the run,
    # without "Reload definitions"; the state is in the materialization and the observations.
    after = _graph_badges(fork_server)
    assert after["/".join(MODEL)] == before["/".join(MODEL)]
    assert not any({"deferred", "fork_materialized", "absent"} & kinds for _, kinds in after.values())

    observe_run = fork_server.launch_job(RELEASE_LOCATION, OBSERVATION_JOB)
    assert fork_server.wait_for_run(observe_run) == "SUCCESS"
    run_id, model_seen = _latest_observation(fork_server, MODEL)
    assert run_id == observe_run and model_seen["fork_state"] == "fork_materialized"
    assert model_seen["snapshot_id"] == fork["/".join(MODEL)]["snapshot_id"]
    run_id, upstream_seen = _latest_observation(fork_server, UPSTREAM)
    assert run_id == observe_run
    assert upstream_seen["fork_state"] == "deferred" and upstream_seen["fork_owner"] == "prod"
    assert upstream_seen["snapshot_id"] == parent["/".join(UPSTREAM)]["snapshot_id"]

    first_tick = fork_server.sensor_dry_run(RELEASE_LOCATION, FORK_SENSOR)
    assert first_tick["error"] is None and first_tick["cursor"] and not first_tick["runRequests"]
    assert first_tick["skipReason"].startswith("observed the fork state of")
    assert re.search(r"\b[1-9]\d* fork_materialized\b", first_tick["skipReason"]), first_tick["skipReason"]
    quiet_tick = fork_server.sensor_dry_run(RELEASE_LOCATION, FORK_SENSOR, cursor=first_tick["cursor"])
    assert quiet_tick["skipReason"].startswith("no ancestor materialized since")

    assert set(fork) == {"/".join(MODEL)}
    metadata = fork["/".join(MODEL)]
    assert metadata["fork_state"] == "fork_materialized"
    assert metadata["workspace"] == FORK
    assert metadata["namespace"].startswith("wm_fork_")

    status = json.loads(dpone("fork", "status", FORK, "--json", env=env))
    tables = {t["table"]: t for lake in status["lakes"] for t in lake["tables"]}
    assert tables["marts.fct_orders"]["fork_state"] == "fork_materialized"
    assert tables["staging.stg_orders"]["fork_state"] == "deferred"
    assert tables["staging.stg_orders"]["owner"] == "prod"


def test_the_fork_sensor_skips_in_prod(webserver):
    tick = webserver.sensor_dry_run(RELEASE_LOCATION, FORK_SENSOR)
    assert tick["error"] is None and not tick["runRequests"]
    assert "'prod' is not a fork" in tick["skipReason"]
