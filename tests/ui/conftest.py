"""One live `dagster-webserver` per test session, over the project's own workspace.yaml.

The server (and the code servers it spawns) run on 127.0.0.1 with a throwaway DAGSTER_HOME and a
throwaway dpone state directory, so the session never touches the developer's `.dpone/`. The
harness is `bench.screenshots.running_webserver`, the same one `make screenshots` uses.

What a reader could get wrong: the webserver is shared by every test in `tests/ui/`, so the tests
are written to hold in any order: each launches what it needs and asserts on its own run ids.
The same holds for `fork_webserver`: ONE fork (`wm-fork-ui`) and one webserver for it, shared by
every fork test, on the Dagster home `dpone dev` prepares for the fork (its own instance, as
`make dev` in a fork uses); prod's webserver uses prod's home under the same state directory, so a
fork that shared prod's instance would show prod's materializations (tests/ui/test_fork_deployment_ui.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bench.screenshots import (
    DEPLOYMENT_LOCATION,
    RELEASE_JOB,
    RELEASE_LOCATION,
    DagsterWebserver,
    dormant_jobs,
    group_asset_keys,
    running_webserver,
    session_workspace,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ui_state_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ui_state")


UI_FORK = "wm-fork-ui"


def ui_env(ui_state_dir: Path, workspace: str | None = None) -> dict[str, str]:
    """The environment a `dpone` command or a webserver of this session runs with (no inherited DPONE_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_") and k != "DAGSTER_HOME"}
    env.update({"DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": str(ui_state_dir)})
    if workspace:
        env["DPONE_WORKSPACE"] = workspace
    return env


def dpone(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dpone")), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def workspace_home(env: dict[str, str]) -> Path:
    """The workspace's Dagster home exactly as `make dev` / `dpone dev` prepares it (fork state recorded)."""
    return Path(json.loads(dpone("dev", "--dry-run", "--json", env=env))["dagster_home"])


@pytest.fixture(scope="session")
def webserver(ui_state_dir: Path) -> Iterator[DagsterWebserver]:
    home = workspace_home(ui_env(ui_state_dir))
    workspace = session_workspace(home / "workspace.yaml")
    env = {
        "DPONE_PROJECT_ROOT": str(REPO_ROOT),
        "DPONE_STATE_DIR": str(ui_state_dir),
        # Credentials of the synthetic runtime's connection aliases (names of its own lake's databases).
        "DPONE_CONNECTION_ORDERS_SOURCE": "orders_source.duckdb",
        "DPONE_CONNECTION_FLOW_LAKE": "flow_lake.duckdb",
    }
    scrubbed = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    with running_webserver(workspace, dagster_home=home, env={**scrubbed, **env}, inherit_env=False) as server:
        yield server


@pytest.fixture(scope="session")
def project_workspace() -> dict:
    return yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())


@pytest.fixture(scope="session")
def released_through_ui(webserver: DagsterWebserver) -> str:
    """The release job launched through GraphQL, finished; returns its run id."""
    run_id = webserver.launch_job(RELEASE_LOCATION, RELEASE_JOB)
    status = webserver.wait_for_run(run_id, timeout=600)
    assert status == "SUCCESS", webserver.run_details(run_id)["events"][-5:]
    entry = webserver.reload_location(DEPLOYMENT_LOCATION)
    assert entry["locationOrLoadError"]["__typename"] == "RepositoryLocation", entry
    return run_id


@pytest.fixture(scope="session")
def refused_task_run(webserver: DagsterWebserver, released_through_ui: str) -> tuple[str, str]:
    """One dormant pre-hook task launched through GraphQL and finished: (job name, run id)."""
    job = dormant_jobs(webserver)["pre_hook"][0]
    run_id = webserver.launch_job(DEPLOYMENT_LOCATION, job)
    webserver.wait_for_run(run_id)
    return job, run_id


@pytest.fixture(scope="session")
def prod_dbt_run(webserver: DagsterWebserver) -> str:
    """The whole synthetic_dbt group materialized in prod through the session webserver; its run id."""
    run_id = webserver.launch_assets(RELEASE_LOCATION, group_asset_keys(webserver, "synthetic_dbt"))
    status = webserver.wait_for_run(run_id, timeout=600)
    assert status == "SUCCESS", [e.get("message") for e in webserver.run_details(run_id)["events"]][-5:]
    return run_id


@pytest.fixture(scope="session")
def fork_webserver(prod_dbt_run: str, ui_state_dir: Path) -> Iterator[DagsterWebserver]:
    """`wm-fork-ui` (parent prod, after prod built every model) served from its own Dagster home."""
    dpone("fork", "create", UI_FORK, "--parent", "prod", env=ui_env(ui_state_dir))
    env = ui_env(ui_state_dir, UI_FORK)
    home = workspace_home(env)
    with running_webserver(
        session_workspace(home / "workspace.yaml"), dagster_home=home, env=env, inherit_env=False
    ) as server:
        yield server
