"""One Dagster job per task of the installed release; launching any of them ends in the admission refusal.

Each job has a single op that builds the standard runtime launcher for this run and calls it. The
launcher runs admission before any port, admission denies every development-family task, and the op
turns the denial into a failed run that says why: the stable code and reason in the failure
message, and the reason, release identity, authority expiry and the count of credential resolutions
(read back from the access ledger) as failure metadata and as run tags.

What a reader could get wrong: the installed release the job was built from is the one re-read and
re-verified when the run worker loads this code location, not a copy captured when the UI loaded it;
a cache altered between the two makes the run fail to load instead of starting.
"""

from dataclasses import dataclass

import dagster as dg
from dagster import OpExecutionContext

from dpone_dagster.deployment.runtime import AccessLedger, deployment_launcher
from dpone_dagster.deployment.tasks import DormantTask
from dpone_dagster.errors import DponeError
from dpone_dagster.release.admission import AdmissionView, ExecutionDeniedError, RevocationEpochSource
from dpone_dagster.release.install import InstalledRelease
from dpone_dagster.clock import Clock

TAG_PREFIX = "dpone/"


class AdmissionInvariantError(DponeError):
    code = "deployment.admission_not_denied"


@dataclass(frozen=True)
class DeploymentRuntime:
    """What every dormant job needs at run time; built once per code-location load."""

    installed: InstalledRelease
    ledger: AccessLedger
    clock: Clock
    epochs: RevocationEpochSource


def dormant_job(task: DormantTask, name: str, runtime: DeploymentRuntime, view: AdmissionView) -> dg.JobDefinition:
    """The job that asks the standard runtime to start `task`."""
    description = _describe(task)
    job_tags = {
        f"{TAG_PREFIX}task_kind": task.kind.value,
        f"{TAG_PREFIX}workload": task.runtime_task.workload_id[:255],
        f"{TAG_PREFIX}dormant": "true",
    }

    @dg.op(name=f"start__{name}", description=description, tags=job_tags)
    def start_task(context: OpExecutionContext) -> None:
        launcher = deployment_launcher(
            ledger=runtime.ledger,
            run_id=context.run_id,
            installed=runtime.installed,
            task=task.runtime_task,
            clock=runtime.clock,
            epochs=runtime.epochs,
        )
        try:
            launcher.launch(view, task.runtime_task)
        except ExecutionDeniedError as denied:
            _report_denial(context, denied, runtime)
        raise AdmissionInvariantError("the standard runtime returned without a denial; refusing to continue")

    @dg.job(name=name, description=description, tags=job_tags, metadata=task.metadata())
    def _job() -> None:
        start_task()

    return _job


def _report_denial(context: OpExecutionContext, denied: ExecutionDeniedError, runtime: DeploymentRuntime) -> None:
    denial = denied.denial
    credential_resolutions = len(runtime.ledger.entries(run_id=context.run_id, port="credentials"))
    port_uses = len(runtime.ledger.entries(run_id=context.run_id))
    context.instance.add_run_tags(
        context.run_id,
        {
            f"{TAG_PREFIX}admission": "denied",
            f"{TAG_PREFIX}denial_reason": denial.reason.value,
            f"{TAG_PREFIX}release_id": denial.release_id,
            f"{TAG_PREFIX}authority_expires_at": denial.authority_expires_at,
        },
    )
    metadata: dict[str, dg.RawMetadataValue] = {
        **denial.as_metadata(),
        "error_code": denied.code,
        "credential_resolutions": credential_resolutions,
        "runtime_port_uses": port_uses,
    }
    raise dg.Failure(description=str(denied), metadata=metadata, allow_retries=False)


def _describe(task: DormantTask) -> str:
    lines = [f"Dormant {task.kind.value} task `{task.label}` of the installed development release."]
    lines.append("Launching it is refused by the standard runtime admission before any credential, source or writer.")
    lines.extend(f"- {key}: {value}" for key, value in task.metadata().items())
    return "\n".join(lines)
