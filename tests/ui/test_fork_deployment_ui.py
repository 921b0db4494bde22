"""A fork is its own Dagster deployment: what its UI shows, in headless Chromium and through GraphQL.

The session's fork webserver (`fork_webserver`) runs on the Dagster home `dpone dev` prepares for
`wm-fork-ui`, after prod built every dbt model (`prod_dbt_run`, through prod's own webserver and
home). In the fork's UI:

1. no fork node carries prod's materialization: prod's dbt run does not exist in the fork's
   instance, and a table only prod built (`stg_orders`) has no materialization at all;
2. that table's latest event is an observation "deferred to prod @ snapshot N", N being the
   snapshot prod's materialization recorded, owner `prod` in its metadata; its asset page says so;
3. after the fork materializes `raw_payments`, its latest materialization (same page, no "Reload
   definitions") says `fork_materialized`, and no graph badge still claims a state;
4. the Runs list shows the run's `dpone/workspace` tag naming the fork.

Seen red (see the report in the commit): with the per-fork Dagster home (and its marker check)
removed, the fork's webserver opens prod's instance and prod's run shows up on every fork node.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path

import pytest

from bench.screenshots import CHROMIUM, RELEASE_LOCATION, _dismiss_first_run_modal, _open_browser, group_asset_keys

from .conftest import UI_FORK

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")

DEFERRED = ["main", "staging", "stg_orders"]  # no UI test builds it in the fork
BUILT = ["main", "raw", "raw_payments"]  # the cheapest model: no upstream
TAG = "dpone/workspace"

_ASSET_EVENTS = """
query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { __typename ... on Asset {
    assetMaterializations(limit: 100) { runId timestamp metadataEntries { label
        ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } }
    assetObservations(limit: 1) { runId timestamp description metadataEntries { label
        ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } } } } }
"""

_RUN = """query($runId: ID!) { runOrError(runId: $runId) { __typename } }"""

_KINDS = """
{ assetNodes(group: {groupName: "synthetic_dbt", repositoryName: "__repository__",
    repositoryLocationName: "dpone_dagster"}) { assetKey { path } kinds } }
"""

_RESOURCE = """
{ topLevelResourceDetailsOrError(resourceSelector: {repositoryLocationName: "dpone_dagster",
    repositoryName: "__repository__", resourceName: "ducklake"}) { __typename
    ... on ResourceDetails { description } } }
"""


def _entries(event: dict) -> dict:
    return {e["label"]: e.get("text", e.get("intValue")) for e in event["metadataEntries"]}


def _events(server, key: list[str]) -> tuple[list[dict], dict | None]:
    asset = server.graphql(_ASSET_EVENTS, {"key": {"path": key}})["assetOrError"]
    if asset["__typename"] != "Asset":  # never had an event in this instance
        return [], None
    observations = asset["assetObservations"]
    return asset["assetMaterializations"], observations[0] if observations else None


def _prod_snapshot(webserver, run_id: str, key: list[str]) -> int:
    for event in webserver.run_details(run_id)["events"]:
        if event["__typename"] == "MaterializationEvent" and event["assetKey"]["path"] == key:
            return _entries(event)["snapshot_id"]
    raise AssertionError(f"prod's run {run_id} did not materialize {key}")


@contextlib.contextmanager
def _browser(server):
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="dpone-chromium-") as profile, sync_playwright() as playwright:
        browser = _open_browser(playwright, Path(profile))
        try:
            page = browser.new_page()
            page.goto(server.base_url + "/overview", wait_until="networkidle")
            _dismiss_first_run_modal(page)
            yield page
        finally:
            browser.close()


def _text(page, server, path: str, expected: str, timeout: float = 30_000) -> str:
    """Open `path` and wait until the page shows `expected`; return the page text."""
    page.goto(server.base_url + path, wait_until="networkidle")
    with contextlib.suppress(Exception):
        page.get_by_text(expected).first.wait_for(timeout=timeout)
    return page.inner_text("body")


@pytest.mark.slow  # a second webserver for a fork and a browser session (~2-4 min)
def test_a_fork_deployment_shows_its_own_events_and_defers_with_owner_and_snapshot(
    webserver, prod_dbt_run, fork_webserver
):
    fork = fork_webserver
    dbt_keys = group_asset_keys(fork, "synthetic_dbt", partitioned=True)
    assert DEFERRED in dbt_keys and BUILT in dbt_keys

    # 1. prod's run is not in the fork's instance, and no fork node carries a prod materialization.
    assert fork.graphql(_RUN, {"runId": prod_dbt_run})["runOrError"]["__typename"] == "RunNotFoundError"
    for key in dbt_keys:
        materializations, _ = _events(fork, key)
        assert all(_entries(m)["workspace"] == UI_FORK for m in materializations), (key, materializations)
        assert prod_dbt_run not in {m["runId"] for m in materializations}
    deferred_materializations, observation = _events(fork, DEFERRED)
    assert deferred_materializations == []

    # 2. its latest event: observed deferred to prod @ the snapshot prod's materialization recorded.
    snapshot = _prod_snapshot(webserver, prod_dbt_run, DEFERRED)
    assert observation is not None
    seen = _entries(observation)
    assert seen["fork_state"] == "deferred" and seen["fork_owner"] == "prod" and seen["snapshot_id"] == snapshot
    assert observation["description"] == f"deferred to prod @ snapshot {snapshot}"

    # 3. the fork builds one model: the latest event says so, with no reload; no badge claims a state.
    run_id = fork.launch_assets(RELEASE_LOCATION, [BUILT])
    assert fork.wait_for_run(run_id, timeout=600) == "SUCCESS", fork.run_details(run_id)["events"][-3:]
    assert fork.run_details(run_id)["tags"][TAG] == UI_FORK
    built, _ = _events(fork, BUILT)
    latest = max(built, key=lambda m: int(m["timestamp"]))
    assert latest["runId"] == run_id and _entries(latest)["fork_state"] == "fork_materialized"
    assert _entries(latest)["workspace"] == UI_FORK and _entries(latest)["fork_owner"] == UI_FORK
    kinds = {"/".join(n["assetKey"]["path"]): set(n["kinds"]) for n in fork.graphql(_KINDS)["assetNodes"]}
    assert all(
        {"ducklake", "fork"} <= k and not k & {"deferred", "fork_materialized", "absent"} for k in kinds.values()
    )
    assert fork.graphql(_RESOURCE)["topLevelResourceDetailsOrError"]["description"].startswith(
        "The fork-aware DuckLake"
    )

    # What a user sees in the browser: the same, on the asset pages and in the Runs list.
    with _browser(fork) as page:
        deferred_page = _text(page, fork, "/assets/" + "/".join(DEFERRED) + "?view=events", "deferred to prod")
        assert f"deferred to prod @ snapshot {snapshot}" in deferred_page
        built_page = _text(page, fork, "/assets/" + "/".join(BUILT) + "?view=events", "fork_materialized")
        assert "fork_materialized" in built_page
        runs_page = _text(page, fork, "/runs", f"{TAG}: {UI_FORK}")
        assert re.search(rf"{re.escape(TAG)}\s*:?\s*{re.escape(UI_FORK)}", runs_page), runs_page[:2000]
