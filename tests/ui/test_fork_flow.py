"""The same flow in a fork, through a second webserver started with `DPONE_WORKSPACE=wm-fork-ui`.

The session webserver (workspace `prod`) materializes the dbt group; a fork is created with the CLI;
a webserver for the fork materializes one model. Its materialization says `fork_materialized` in the
fork's namespace, the parent's says `own`, and the fork's status shows the model's upstream tables
deferred to `prod`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.screenshots import RELEASE_LOCATION, group_asset_keys, running_webserver, session_workspace

FORK = "wm-fork-ui"
MODEL = ["main", "marts", "fct_orders"]


def _materialized(webserver, run_id: str) -> dict[str, dict]:
    out = {}
    for event in webserver.run_details(run_id)["events"]:
        if event["__typename"] == "MaterializationEvent":
            out["/".join(event["assetKey"]["path"])] = {
                entry["label"]: entry.get("text", entry.get("intValue")) for entry in event["metadataEntries"]
            }
    return out


def _dpone(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dpone")), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_fork_materializes_one_model_and_defers_the_rest(webserver, ui_state_dir, tmp_path_factory):
    parent_run = webserver.launch_assets(RELEASE_LOCATION, group_asset_keys(webserver, "synthetic_dbt"))
    assert webserver.wait_for_run(parent_run, timeout=600) == "SUCCESS"
    parent = _materialized(webserver, parent_run)
    assert parent["main/marts/fct_orders"]["fork_state"] == "own"

    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update({"DPONE_PROJECT_ROOT": str(Path(__file__).resolve().parents[2]), "DPONE_STATE_DIR": str(ui_state_dir)})
    _dpone("fork", "create", FORK, "--parent", "prod", env=env)

    home = tmp_path_factory.mktemp("fork_dagster_home")
    with running_webserver(
        session_workspace(home / "workspace.yaml"), dagster_home=home, env={**env, "DPONE_WORKSPACE": FORK}, inherit_env=False
    ) as fork_server:
        fork_run = fork_server.launch_assets(RELEASE_LOCATION, [MODEL])
        assert fork_server.wait_for_run(fork_run, timeout=600) == "SUCCESS"
        fork = _materialized(fork_server, fork_run)

    assert set(fork) == {"/".join(MODEL)}
    metadata = fork["/".join(MODEL)]
    assert metadata["fork_state"] == "fork_materialized"
    assert metadata["workspace"] == FORK
    assert metadata["namespace"].startswith("wm_fork_")

    status = json.loads(_dpone("fork", "status", FORK, "--json", env=env))
    tables = {t["table"]: t for lake in status["lakes"] for t in lake["tables"]}
    assert tables["marts.fct_orders"]["fork_state"] == "fork_materialized"
    assert tables["staging.stg_orders"]["fork_state"] == "deferred"
    assert tables["staging.stg_orders"]["owner"] == "prod"
