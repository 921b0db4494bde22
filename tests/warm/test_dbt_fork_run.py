"""The real user path: a model edited in a fork, then the UI's launch of its dbt asset, warm.

A copy of `dbt_project_synthetic` under its own project root, prod built through Dagster and a fork
(`bench/bench_peers.py`'s preparation), then the fork's webserver as `dpone dev` serves it: a fork
home with `WarmRunLauncher` + the sync coordinator, the server started through the confinement
launcher. Before every launch `daily_revenue.sql` is edited (a `limit n`: the edit is visible as the
row count dagster-dbt's op records on the materialization, read from the fork's table).

The first launch has no warm worker yet (default path); a later one must go warm, succeed, and
record the row count of *its* edit (so the worker, loaded before the edit, still built the edited
SQL in the fork), while prod's catalog and data files stay byte-identical.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from dpone_dagster.integration.warm.launcher import FALLBACK_TAG, LAUNCHER_TAG
from tests.confinement.harness import needs_landlock

pytestmark = [pytest.mark.slow, needs_landlock]


def _prod_digest(catalog: str, data_path: str) -> dict[str, str]:
    files = [Path(catalog.removeprefix("duckdb:")), *sorted(p for p in Path(data_path).rglob("*") if p.is_file())]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def _row_count(details: dict, key: list[str]) -> int | None:
    for event in details["events"]:
        if event.get("__typename") == "MaterializationEvent" and event["assetKey"]["path"] == key:
            for entry in event["metadataEntries"]:
                if entry["label"] == "dagster/row_count":
                    return entry["intValue"]
    return None


def test_an_edited_model_launched_from_the_forks_ui_runs_warm_and_builds_the_edit_in_the_fork(tmp_path):
    from bench.bench_peers import prepare, prod_lake_paths, synthetic_project, warm_fork_webserver
    from bench.screenshots import RELEASE_LOCATION

    project = synthetic_project(tmp_path)
    prepare(project, tmp_path)
    prod_before = _prod_digest(*prod_lake_paths(project, tmp_path))
    model = project.model_file
    original = model.read_text(encoding="utf-8")
    assert "group by all" in original

    def edited_launch(server, limit: int) -> dict:
        model.write_text(original.replace("group by all", f"group by all\nlimit {limit}"), encoding="utf-8")
        run_id = server.launch_assets(RELEASE_LOCATION, [project.key])
        status = server.wait_for_run(run_id, timeout=600)
        details = server.run_details(run_id)
        errors = [e["error"]["message"] for e in details["events"] if e.get("error")]
        assert status == "SUCCESS", (details["tags"], errors, server.log_tail())
        return details

    with warm_fork_webserver(project, tmp_path) as server:
        first = edited_launch(server, 3)
        assert first["tags"][FALLBACK_TAG] == "warm.worker_unavailable", first["tags"]
        assert _row_count(first, project.key) == 3
        warm = None
        for limit in (1, 2, 1, 2):  # the worker loads while the first run ends; a busy machine needs longer
            details = edited_launch(server, limit)
            if details["tags"][LAUNCHER_TAG] == "warm":
                warm = (details, limit)
                break
            said = " ".join(e.get("message") or "" for e in details["events"] if "Launched" in (e.get("message") or ""))
            # not ready yet, or a Python file changed: other work in a shared checkout edits the package's
            # modules. Never the edited model: an SQL edit in place must not make the worker stale.
            python_changed = ".py changed since the warm worker loaded" in said
            assert details["tags"][FALLBACK_TAG] == "warm.worker_unavailable" or python_changed, said
            assert _row_count(details, project.key) == limit
            time.sleep(20)
    assert warm is not None, "no launch after an edit went warm"
    details, limit = warm
    assert details["tags"]["dpone/workspace"] == "wm-fork-peers"
    assert _row_count(details, project.key) == limit, details["events"]
    assert any("Launched in a warm run worker" in (e.get("message") or "") for e in details["events"])
    commands = [e["message"] for e in details["events"] if (e.get("message") or "").startswith("Running dbt command")]
    assert commands and all("/dpone-dbt-" in c for c in commands), commands  # the pre-imported dbt (prewarm.py)
    assert _prod_digest(*prod_lake_paths(project, tmp_path)) == prod_before
