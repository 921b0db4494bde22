"""What a finished release run means: the installed release and its dormancy, or the refusal with its code.

`summarize_release_run(run)` reads a `ReleaseRun` (what the stages of one run reported, as plain
values: materialization metadata per stage, check outcomes, step failures) and returns the
`ReleaseRunSummary` `dpone demo` prints: the installed release identity and deployment, and the
result of the standard runtime admission over every task (all denied, zero credential resolutions).
A run that did not install raises `ReleaseRunError` under the refusal's own stable code (e.g.
`authority.expired`): the first failed check's, else the first failed step's.

What a reader could get wrong: this module reads no Dagster object. Running the job and turning its
events into a `ReleaseRun` is the caller's (`dpone_dagster.api_release`); the stage and check
names it keys on (`installed_release`, `tasks_denied_before_credentials`, ...) are the release group's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dpone_dagster.errors import DponeError

INSTALLED_STAGE = "installed_release"
POLICY_STAGE = "development_policy"
DORMANCY_CHECK = "tasks_denied_before_credentials"
DENIED_PREFIX = "denied: "


class ReleaseRunError(DponeError):
    code = "release.run_failed"


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    description: str | None
    metadata: Mapping[str, object]


@dataclass(frozen=True)
class StepFailure:
    step_key: str
    description: str | None
    error_code: str | None


@dataclass(frozen=True)
class ReleaseRun:
    """What one release run reported: metadata per materialized stage, checks by name, failed steps (in order)."""

    run_id: str
    succeeded: bool
    materialized: Mapping[str, Mapping[str, object]]
    checks: Mapping[str, CheckOutcome]
    step_failures: Sequence[StepFailure] = ()


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


def summarize_release_run(run: ReleaseRun) -> ReleaseRunSummary:
    """The summary of a finished release run; raise the refusal (with its code) if it did not install."""
    if not run.succeeded or INSTALLED_STAGE not in run.materialized:
        raise _refusal(run)
    dormancy = run.checks.get(DORMANCY_CHECK)
    if dormancy is None or not dormancy.passed:
        raise ReleaseRunError(f"the dormancy check did not pass (run {run.run_id})")
    installed, checked = run.materialized[INSTALLED_STAGE], dormancy.metadata
    return ReleaseRunSummary(
        run_id=run.run_id,
        release_id=str(installed["release_id"]),
        deployment_id=str(installed["deployment_id"]),
        synthetic=bool(run.materialized[POLICY_STAGE]["synthetic"]),
        tasks=int(checked["tasks"]),
        denied={k.removeprefix(DENIED_PREFIX): int(v) for k, v in checked.items() if k.startswith(DENIED_PREFIX)},
        credential_resolutions=int(checked["credential_resolutions"]),
    )


def _refusal(run: ReleaseRun) -> ReleaseRunError:
    for check in run.checks.values():
        if not check.passed:
            code = check.metadata.get("error_code")
            return _coded(check.description or "a release check failed", str(code) if code is not None else None)
    for failure in run.step_failures:
        return _coded(failure.description or f"step {failure.step_key} failed", failure.error_code)
    return ReleaseRunError(f"the release run {run.run_id} did not complete")


def _coded(message: str, code: str | None) -> ReleaseRunError:
    """The refusal under its own code; the `[code] ` prefix the step message carries is not repeated."""
    if code is not None:
        message = message.removeprefix(f"[{code}] ")
    return ReleaseRunError(message, code=code)
