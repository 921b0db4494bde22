"""User Python in a Dagster asset of a fork, run by `dagster asset materialize` under the launcher.

The run's steps execute in processes the confined command starts (the multiprocess executor), so
they inherit the confinement: a plain `duckdb.connect()` COPY onto a prod data file and an
`os.remove` of one fail with Permission denied, while the fork's own table is written through the
`ducklake` resource. The run lands in the fork's own Dagster home. With `DPONE_TEST_CONFINEMENT=off`
the doors succeed and the test goes red.
"""

from __future__ import annotations

import sys

from dagster import DagsterEventType, DagsterInstance

from dpone_dagster.workspaces.dagster_home import workspace_segment

from .harness import FORK, build_forked_state, needs_landlock, run_for_fork

pytestmark = needs_landlock


def _step_outcomes(home) -> dict[str, str]:
    """step key -> the failure text ('' when it succeeded) of the one run in the Dagster home."""
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        outcomes: dict[str, str] = {}
        for record in instance.all_logs(run.run_id):
            event = record.dagster_event
            if event is None or event.event_type not in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                continue
            error = getattr(event.event_specific_data, "error", None)
            texts = []
            while error is not None:
                texts.append(error.message)
                error = error.cause
            outcomes[event.step_key] = "\n".join(texts) if event.event_type == DagsterEventType.STEP_FAILURE else ""
    return outcomes


def test_user_python_in_a_fork_asset_cannot_write_the_parents_files(tmp_path):
    forked = build_forked_state(tmp_path / "state")
    before = forked.fingerprint()
    home = forked.state_dir / "workspaces" / workspace_segment(FORK) / "dagster_home"
    home.mkdir(parents=True)  # unconfined runs need it too; the launcher prepares it for confined ones
    command = [
        sys.executable,
        "-m",
        "dagster",
        "asset",
        "materialize",
        "-f",
        "tests/confinement/fork_assets.py",
        "--select",
        "*",
    ]
    done = run_for_fork(command, forked.env(DOOR_PROD_FILE=str(forked.prod_file), DAGSTER_HOME=str(home)))
    outcomes = _step_outcomes(home)
    assert set(outcomes) == {"copy_door", "remove_door", "own_table"}, done.stderr[-3000:]
    assert "Permission denied" in outcomes["copy_door"], outcomes["copy_door"][-800:]
    assert "Permission denied" in outcomes["remove_door"], outcomes["remove_door"][-800:]
    assert outcomes["own_table"] == ""
    assert forked.fingerprint() == before
