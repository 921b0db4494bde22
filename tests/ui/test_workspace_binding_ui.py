"""A fork's UI cannot write prod (issue 9, reproduction 1), through a real webserver's GraphQL `launchRun`.

`prod` has built the dbt models through the session webserver (`prod_dbt_run`); the session's fork
(`wm-fork-ui`, created with the CLI) is served by its own webserver with `DPONE_WORKSPACE=<fork>`
(`fork_webserver`, shared with the other fork tests). From that UI:

1. `launchRun` with `resources: {ducklake: {config: {workspace: prod}}}` is refused by run config
   validation (the field does not exist): no run is created.
2. `launchRun` with the launchpad tag `dpone/workspace: prod` creates a run that fails with
   `workspace.not_this_deployment` before any step starts; nothing is materialized.
3. `launchRun` with neither materializes the fork's own `raw_customers`; the run is tagged
   `dpone/workspace=<fork>`.

prod's snapshots, catalog data files, stored files and `raw_customers` rows are the same before and
after all three.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bench.screenshots import RELEASE_LOCATION

from .conftest import UI_FORK, ui_env

FORK = UI_FORK
# The cheapest model to build (no upstream, no test reading another model): the refusals do not
# depend on the model, and every dbt model is written through the same `ducklake` resource.
MODEL = ["main", "raw", "raw_customers"]
TAG = "dpone/workspace"
REPO_ROOT = Path(__file__).resolve().parents[2]

_LAUNCH = """
mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message } } }
"""

_RUN = """
query($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run { status tags { key value } } }
  logsForRun(runId: $runId, limit: 1000) { __typename ... on EventConnection { events { __typename
    ... on ErrorEvent { error { message causes { message } } }
    ... on MaterializationEvent { assetKey { path } metadataEntries { label ... on TextMetadataEntry { text } } }
  } } } }
"""


def _launch(server, *, run_config: dict | None = None, tags: dict[str, str] | None = None) -> dict:
    params = {
        "selector": {
            "repositoryLocationName": RELEASE_LOCATION,
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": MODEL}],
        },
        "runConfigData": run_config or {},
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
    }
    return server.graphql(_LAUNCH, {"params": params})["launchRun"]


def _run(server, run_id: str) -> tuple[str, dict[str, str], list[str], dict[str, dict[str, str]]]:
    """(status, tags, every error message with its causes, materializations with their text metadata)."""
    data = server.graphql(_RUN, {"runId": run_id})
    run, events = data["runOrError"], data["logsForRun"]["events"]
    errors = [
        message
        for e in events
        if e.get("error")
        for message in [e["error"]["message"], *(c["message"] for c in e["error"]["causes"])]
    ]
    materialized = {
        "/".join(e["assetKey"]["path"]): {m["label"]: m.get("text") for m in e["metadataEntries"]}
        for e in events
        if e["__typename"] == "MaterializationEvent"
    }
    return run["status"], {t["key"]: t["value"] for t in run["tags"]}, errors, materialized


def _prod_state(env: dict[str, str]) -> tuple:
    """Everything of prod's `main` lake a write would change, read from the test process."""
    from dpone_dagster.config import load_config
    from dpone_dagster.lake.duck import connect
    from dpone_dagster.lake.resolution.seam import resolve

    config = load_config(env)
    resolved = resolve("prod", "main", config=config)
    conn = connect(extensions=resolved.extensions)
    try:
        resolved.apply(conn)
        snapshots = conn.execute(
            "SELECT snapshot_id, changes::VARCHAR FROM lake_main.snapshots() ORDER BY 1"
        ).fetchall()
        files = conn.execute("SELECT path FROM __ducklake_metadata_lake_main.ducklake_data_file ORDER BY 1").fetchall()
        rows = conn.execute("SELECT * FROM lake_main.raw.raw_customers ORDER BY ALL").fetchall()
    finally:
        conn.close()
    stored = sorted(str(p) for p in Path(resolved.data_path).rglob("*") if p.is_file())
    return tuple(snapshots), tuple(files), len(rows), hashlib.sha256(repr(rows).encode()).hexdigest(), tuple(stored)


@pytest.mark.slow
def test_a_fork_ui_cannot_write_prod_through_run_config_or_tags(webserver, prod_dbt_run, fork_webserver, ui_state_dir):
    assert webserver.run_details(prod_dbt_run)["tags"][TAG] == "prod"
    env = ui_env(ui_state_dir)
    before = _prod_state(env)
    assert before[2] > 0

    fork_server = fork_webserver
    override = _launch(fork_server, run_config={"resources": {"ducklake": {"config": {"workspace": "prod"}}}})
    assert override["__typename"] == "RunConfigValidationInvalid", override
    assert any("workspace" in error["message"] for error in override["errors"]), override

    tagged = _launch(fork_server, tags={TAG: "prod"})
    assert tagged["__typename"] == "LaunchRunSuccess", tagged
    tagged_id = tagged["run"]["runId"]
    assert fork_server.wait_for_run(tagged_id, timeout=600) == "FAILURE"
    _, tagged_tags, errors, materialized = _run(fork_server, tagged_id)
    assert any("[workspace.not_this_deployment]" in message for message in errors), errors
    assert materialized == {} and tagged_tags[TAG] == "prod"

    plain = _launch(fork_server)
    assert plain["__typename"] == "LaunchRunSuccess", plain
    plain_id = plain["run"]["runId"]
    assert fork_server.wait_for_run(plain_id, timeout=600) == "SUCCESS", _run(fork_server, plain_id)[2][-3:]
    _, plain_tags, _, materialized = _run(fork_server, plain_id)
    assert plain_tags[TAG] == FORK
    assert materialized["/".join(MODEL)]["workspace"] == FORK
    assert materialized["/".join(MODEL)]["fork_state"] == "fork_materialized"

    assert _prod_state(env) == before
