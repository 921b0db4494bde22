"""The warm-launcher tests' setup: a real DagsterInstance on a temp home, a code server, GraphQL launches.

`served(folder, home)` copies `location_source.py` into `folder` as `warm_location.py` and yields a
`Served`: the instance of `home` and a GraphQL request context over a code server Dagster starts for
the location, exactly as the webserver does. In-process tests act for prod with the documented opt-in
(`opted_in_home`); the fork script uses the fork's embedded home as `prepare_dagster_home` writes it.
`launch` is the UI's launchRun mutation; `wait` polls the run until it finished.

Run as a script (`python -m tests.warm.harness <folder>`, WARM_TEST_DIR=<folder>), it launches `ok` (cold: no worker
yet), then, once a worker is ready, `ok` again and `ok` tagged for `prod`, and prints a JSON report: how
the fork-isolation test drives a fork's launcher from a confined process. The pytest process itself is
never confined.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from dagster import DagsterInstance, DagsterRunStatus
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from dpone_dagster.workspaces.dagster_home import WARM_RUNS_YAML

HERE = Path(__file__).resolve().parent
LOCATION = "warm"

_LAUNCH = """
mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message } } }
"""
_TERMINATE = """
mutation($runId: String!) { terminateRun(runId: $runId) { __typename
    ... on TerminateRunSuccess { run { runId } }
    ... on TerminateRunFailure { message }
    ... on PythonError { message } } }
"""


@dataclass
class Served:
    instance: DagsterInstance
    context: object  # WorkspaceRequestContext
    folder: Path
    default_run: str | None = None

    @property
    def launcher(self):
        return self.instance.run_launcher

    def launch(self, asset: str, tags: Mapping[str, str] | None = None) -> str:
        params = {
            "selector": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": [asset]}],
            },
            "runConfigData": {},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
        }
        result = execute_dagster_graphql(self.context, _LAUNCH, {"params": params}).data["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", result
        return result["run"]["runId"]

    def terminate(self, run_id: str) -> dict:
        return execute_dagster_graphql(self.context, _TERMINATE, {"runId": run_id}).data["terminateRun"]

    def wait(self, run_id: str, timeout: float = 120.0) -> DagsterRunStatus:
        deadline = time.monotonic() + timeout
        while True:
            run = self.instance.get_run_by_id(run_id)
            if run.is_finished:
                return run.status
            assert time.monotonic() < deadline, f"run still {run.status} after {timeout}s"
            time.sleep(0.1)

    def wait_for_ready_worker(self, timeout: float = 120.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            ready = [w for w in self.launcher.idle_workers() if w.ready.is_set()]
            if ready:
                return ready[0].pid
            assert time.monotonic() < deadline, "no warm worker became ready"
            time.sleep(0.1)

    def tags(self, run_id: str) -> dict[str, str]:
        return dict(self.instance.get_run_by_id(run_id).tags)

    def event_types(self, run_id: str) -> list[str]:
        records = self.instance.all_logs(run_id)
        return [r.dagster_event.event_type_value for r in records if r.dagster_event is not None]

    def text(self, run_id: str) -> str:
        """Every event's message and event data (errors included) of the run, one line each."""
        return "\n".join(
            f"{record.message} {record.dagster_event.event_specific_data if record.dagster_event else ''}"
            for record in self.instance.all_logs(run_id)
        )


WARM_YAML = WARM_RUNS_YAML + "telemetry:\n  enabled: false\n"
"""The opt-in docs/warm-runs.md gives for a home dpone does not write (here: prod's, in the tests)."""


def opted_in_home(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text(WARM_YAML, encoding="utf-8")
    return path


def write_location(folder: Path) -> Path:
    """`warm_location.py` and a workspace.yaml serving it from `folder` (its own working directory)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "location_source.py", folder / "warm_location.py")
    entry = {"module_name": "warm_location", "attribute": "defs", "location_name": LOCATION}
    entry["working_directory"] = str(folder)
    workspace_file = folder / "workspace.yaml"
    workspace_file.write_text(yaml.safe_dump({"load_from": [{"python_module": entry}]}), encoding="utf-8")
    return workspace_file


@contextlib.contextmanager
def served(folder: Path, home: Path) -> Iterator[Served]:
    """The location in `folder` served to the instance in `home` (WARM_TEST_DIR must name `folder`)."""
    workspace_file = write_location(folder)
    with DagsterInstance.from_config(str(home)) as instance:
        with define_out_of_process_context(str(workspace_file), None, instance) as context:
            yield Served(instance, context, folder)


def _fork_report(folder: Path) -> dict:
    """In a (confined) fork process: its embedded home as `dpone dev` prepares it, three launches."""
    from dpone_dagster.config import load_config
    from dpone_dagster.workspaces.dagster_home import prepare_dagster_home

    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    home = prepare_dagster_home(load_config(env), env).path
    with served(folder, home) as serving:
        first = serving.launch("ok")
        first_status = serving.wait(first)
        serving.wait_for_ready_worker()
        own = serving.launch("ok")
        own_status = serving.wait(own)
        serving.wait_for_ready_worker()
        other = serving.launch("ok", {"dpone/workspace": "prod"})
        other_status = serving.wait(other)
        return {
            "first": [first_status.value, serving.tags(first)],
            "own": [own_status.value, serving.tags(own)],
            "other": [other_status.value, serving.tags(other), serving.text(other)],
        }


if __name__ == "__main__":
    print(json.dumps(_fork_report(Path(sys.argv[1]))))
