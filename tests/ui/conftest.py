"""One live `dagster-webserver` per test session, over the project's own workspace.yaml.

The server (and the code servers it spawns) run on 127.0.0.1 with a throwaway DAGSTER_HOME and a
throwaway dpone state directory, so the session never touches the developer's `.dpone/`. The
harness is `bench.screenshots.running_webserver`, the same one `make screenshots` uses.

What a reader could get wrong: the webserver is shared by every test in `tests/ui/`, so the tests
are written to hold in any order: each launches what it needs and asserts on its own run ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]

from bench.screenshots import (
    DEPLOYMENT_LOCATION,
    dormant_jobs,
    RELEASE_JOB,
    RELEASE_LOCATION,
    DagsterWebserver,
    running_webserver,
    session_workspace,
)


@pytest.fixture(scope="session")
def ui_state_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ui_state")


@pytest.fixture(scope="session")
def webserver(tmp_path_factory, ui_state_dir: Path) -> Iterator[DagsterWebserver]:
    home = tmp_path_factory.mktemp("dagster_home")
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
