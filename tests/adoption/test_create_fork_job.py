"""A fork can be created from the UI (issue 18 item 4): `create_fork_job`'s launchpad config is the
fork dialog; bad input fails the run with one coded line; the run's metadata says how to open the
fork's UI; the job is part of the lake definitions the integration gives."""

from __future__ import annotations

import dagster as dg
import pytest

from dpone_dagster.config import load_config
from dpone_dagster.integration.lake.definitions import fork_lake_definitions
from dpone_dagster.integration.lake.jobs import build_create_fork_job
from dpone_dagster.workspaces.service import Workspaces


def _run(**dialog):
    return build_create_fork_job().execute_in_process(
        run_config={"ops": {"create_fork_op": {"config": {"owner": "alice", **dialog}}}},
        raise_on_error=False,
    )


def _failure(result) -> tuple[str, str]:
    [event] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    error = event.step_failure_data.error
    assert error.cause is None  # no raw exception chained under the coded Failure
    user_failure = event.step_failure_data.user_failure_data
    return user_failure.description, user_failure.metadata["code"].value


def _forks() -> dict[str, object]:
    return {w.id: w for w in Workspaces(load_config()).list() if not w.deleted}


def test_the_dialog_creates_a_fork_of_the_deployments_workspace_and_says_how_to_open_it() -> None:
    result = _run(fork_id="wm-alice-ui", shared_lakes=[], pin=False, ttl="3d")
    assert result.success
    fork = _forks()["wm-alice-ui"]
    assert (fork.parent_id, fork.owner, fork.shared_lakes) == ("prod", "alice", ())
    [output] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    metadata = output.step_output_data.metadata
    assert "dpone dev --workspace wm-alice-ui" in metadata["open_ui"].value
    assert metadata["parent"].value == "prod"


def test_shared_lakes_are_stamped_and_others_stay_isolated() -> None:
    assert _run(fork_id="wm-alice-shared", shared_lakes=["main"]).success
    assert _forks()["wm-alice-shared"].shared_lakes == ("main",)


@pytest.mark.parametrize(
    ("dialog", "code"),
    [
        ({"fork_id": "bad id with spaces"}, "workspace.invalid_id"),
        ({"fork_id": "prod"}, "workspace.root_protected"),
        ({"fork_id": "wm-x", "shared_lakes": ["ghost"]}, "workspace.unknown_lake"),
        ({"fork_id": "wm-y", "ttl": "soon"}, "config.invalid_duration"),
        ({"fork_id": "wm-z", "owner": " "}, "workspace.owner_required"),
    ],
)
def test_bad_input_fails_with_one_coded_line_and_creates_nothing(dialog, code) -> None:
    result = _run(**dialog)
    assert not result.success
    message, failed_code = _failure(result)
    assert failed_code == code and message.startswith(f"[{code}]")
    assert "Traceback" not in message and "\n" not in message.strip() and "/" not in message.split("]")[0]
    assert set(_forks()) == {"prod"} or dialog["fork_id"] not in _forks()


def test_an_existing_fork_is_refused() -> None:
    assert _run(fork_id="wm-twice").success
    result = _run(fork_id="wm-twice")
    assert _failure(result)[1] == "workspace.exists"


def test_the_integrations_lake_definitions_give_the_job() -> None:
    assert fork_lake_definitions().resolve_job_def("create_fork_job") is not None
