"""Run a location's `release_job` in process and read what it reported.

`api.run_release`, and the release half of `dpone demo`.

`run_release_job(location, instance)` executes the `release_job` of a loaded code location
(`dpone_dagster.cli.location.load_location`) and returns its `ReleaseRunSummary`
(`dpone_dagster.release.run_summary`); a refusal raises `ReleaseRunError` under the refusal's own code.
`release_run_of(result)` turns the Dagster result into the plain `ReleaseRun` the summary reads.

What a reader could get wrong: this is not a second way to publish. It runs the very job the UI
launches, with the location's own resources and checks, and adds nothing but a summary.
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.release.run_summary import (
    CheckOutcome,
    ReleaseRun,
    ReleaseRunSummary,
    StepFailure,
    summarize_release_run,
)

RELEASE_JOB = "release_job"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def run_release_job(location: dg.Definitions, instance: dg.DagsterInstance) -> ReleaseRunSummary:
    """Execute `location`'s `release_job` on `instance` and summarize it (or raise its refusal)."""
    result = location.resolve_job_def(RELEASE_JOB).execute_in_process(
        instance=instance, raise_on_error=False, run_config=QUIET
    )
    return summarize_release_run(release_run_of(result))


def release_run_of(result: dg.ExecuteInProcessResult) -> ReleaseRun:
    """What the run's stages reported, as plain values (metadata values unwrapped)."""
    failures = []
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            failure = event.event_specific_data.user_failure_data
            code = failure.metadata.get("error_code") if failure is not None else None
            failures.append(
                StepFailure(
                    step_key=str(event.step_key),
                    description=failure.description if failure is not None else None,
                    error_code=code.value if code is not None else None,
                )
            )
    return ReleaseRun(
        run_id=result.run_id,
        succeeded=result.success,
        materialized={
            event.asset_key.to_user_string(): _values(event.materialization.metadata)
            for event in result.get_asset_materialization_events()
        },
        checks={
            event.check_name: CheckOutcome(event.passed, event.description, _values(event.metadata))
            for event in result.get_asset_check_evaluations()
        },
        step_failures=tuple(failures),
    )


def _values(metadata) -> dict[str, object]:
    return {key: value.value for key, value in metadata.items()}
