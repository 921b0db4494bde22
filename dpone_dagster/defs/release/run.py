"""Run the release job in process and summarize it: what `dpone demo` prints after the dbt models.

`run_release_job(instance)` executes `release_job` from the code location's own definitions and
returns a `ReleaseRunSummary`: the installed release identity and deployment, and the result of the
standard runtime admission over every task (all denied, zero credential resolutions). A refusal
raises `ReleaseRunError` whose code is the refusal's own stable code (e.g. `authority.expired`).

What a reader could get wrong: this is not a second way to publish. It runs the very job the UI
launches, built by the same `location_definitions()` with the same resources and checks; it adds
nothing but a summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from dpone_dagster.errors import DponeError


class ReleaseRunError(DponeError):
    code = "release.run_failed"


@dataclass(frozen=True)
class ReleaseRunSummary:
    run_id: str
    release_id: str
    deployment_id: str
    synthetic: bool
    tasks: int
    denied: dict[str, int]
    credential_resolutions: int

    def lines(self) -> list[str]:
        denied = ", ".join(f"{count} {reason}" for reason, count in sorted(self.denied.items())) or "none"
        return [
            f"installed release {self.release_id}" + (" (SYNTHETIC authority)" if self.synthetic else ""),
            f"  deployment: {self.deployment_id}",
            f"  runtime admission: {sum(self.denied.values())} of {self.tasks} tasks denied ({denied}); "
            f"credential resolutions: {self.credential_resolutions}",
        ]


def run_release_job(instance: dg.DagsterInstance) -> ReleaseRunSummary:
    """Execute `release_job` for the configured environment (read now, not at import) and summarize it."""
    from dpone_dagster.defs.release.definitions import location_definitions

    result = location_definitions().resolve_job_def("release_job").execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    return summarize(result)


def summarize(result: dg.ExecuteInProcessResult) -> ReleaseRunSummary:
    """The summary of a finished release run; raise the refusal (with its code) if it did not install."""
    materialized = {
        event.asset_key.to_user_string(): {k: v.value for k, v in event.materialization.metadata.items()}
        for event in result.get_asset_materialization_events()
    }
    checks = {event.check_name: event for event in result.get_asset_check_evaluations()}
    if not result.success or "installed_release" not in materialized:
        raise _refusal(result, checks)
    dormancy = checks.get("tasks_denied_before_credentials")
    if dormancy is None or not dormancy.passed:
        raise ReleaseRunError(f"the dormancy check did not pass (run {result.run_id})")
    check_metadata = {k: v.value for k, v in dormancy.metadata.items()}
    installed = materialized["installed_release"]
    return ReleaseRunSummary(
        run_id=result.run_id,
        release_id=str(installed["release_id"]),
        deployment_id=str(installed["deployment_id"]),
        synthetic=bool(materialized["development_policy"]["synthetic"]),
        tasks=int(check_metadata["tasks"]),
        denied={k.removeprefix("denied: "): int(v) for k, v in check_metadata.items() if k.startswith("denied: ")},
        credential_resolutions=int(check_metadata["credential_resolutions"]),
    )


def _refusal(result: dg.ExecuteInProcessResult, checks: dict) -> ReleaseRunError:
    for event in checks.values():
        if not event.passed:
            code = event.metadata.get("error_code")
            return _coded(event.description or "a release check failed", code.value if code else None)
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            data = event.event_specific_data
            failure = data.user_failure_data
            code = failure.metadata.get("error_code") if failure is not None else None
            message = failure.description if failure is not None and failure.description else f"step {event.step_key} failed"
            return _coded(message, code.value if code else None)
    return ReleaseRunError(f"the release run {result.run_id} did not complete")


def _coded(message: str, code: str | None) -> ReleaseRunError:
    """The refusal under its own code; the `[code] ` prefix the step message carries is not repeated."""
    if code is not None:
        message = message.removeprefix(f"[{code}] ")
    return ReleaseRunError(message, code=code)
