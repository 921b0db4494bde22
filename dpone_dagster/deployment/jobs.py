"""One Dagster job per task of an installed release; each asks the standard runtime to start its task.

Each task has one op that builds the standard runtime launcher for this run (real, ledgered ports:
`dpone_dagster.release.runtime.ports`) and calls it; a task's job runs the ops of the pre-hooks it
depends on first (`family_jobs`). Admission decides before any port:

- a refusal (every development-family task) is persisted (a `runtime_denials` row in the control
  store and the release state Installed → Denied, through `ReleaseDenials`), tagged on the run
  (`dpone/admission=denied`, reason, release, authority expiry) and raised as a `dagster.Failure`
  whose description is `[release.execution_denied] <reason>: …` and whose metadata carries the
  reason, identity, expiry and the ledger's credential-resolution and port-use counts (zero);
- a grant (a synthetic-family task on a synthetic target) runs: the op's output metadata shows the
  statements run, rows per written relation, and the ledger's counts (credential resolutions > 0).
- a typed failure after admission (a missing credential variable, a failed statement) is a
  `dagster.Failure` with its code, never a traceback.

What a reader could get wrong: the installed release a job was built from is the one re-read and
re-verified when the run worker loads this code location, not a copy captured when the UI loaded it;
a cache altered between the two makes the run fail to load instead of starting.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster import OpExecutionContext

from dpone_dagster.clock import Clock
from dpone_dagster.config import load_config
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import DponeError
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.platform.target import ProtectedTarget
from dpone_dagster.release.runtime.admission import SYNTHETIC_FAMILY, AdmissionView, ExecutionDeniedError
from dpone_dagster.release.runtime.catalog import DormantTask
from dpone_dagster.release.runtime.ports import AccessLedger, RunnableRelease, WriteOutcome, runtime_launcher
from dpone_dagster.release.state import ReleaseDenials, ReleaseStateMachine

TAG_PREFIX = "dpone/"
DENIAL_ORIGIN = "deployment_run"


@dataclass(frozen=True)
class DeploymentRuntime:
    """What every job needs at run time; built once per code-location load."""

    settings: ReleaseSettings
    ledger: AccessLedger
    clock: Clock
    target: ProtectedTarget


@dataclass(frozen=True)
class FamilyRelease:
    """One installed release of one family: its verified bytes, its admission view, its writer directory."""

    release: RunnableRelease
    view: AdmissionView
    lake_dir: Path | None


def family_jobs(
    tasks: Sequence[DormantTask], names: Sequence[str], runtime: DeploymentRuntime, family: FamilyRelease
) -> list[dg.JobDefinition]:
    """One job per task (named by `names`); each runs its task after the pre-hooks it runs after.

    A task's pre-hooks (transitively, in the workload's hook order) are ops of its job that its op
    waits for, so a flow never runs before its pre-hooks, even on a fresh lake; a refused or failed
    hook stops the job before the task. Every task has one op definition, shared by every job that
    runs it (Dagster needs one definition per op name).
    """
    named = list(zip(tasks, names, strict=True))
    ops = {task.label: _start_op(task, name, runtime, family) for task, name in named}
    hooks = {
        (task.runtime_task.workload_id, task.runtime_task.hook_id): task
        for task, _ in named
        if task.runtime_task.hook_id
    }
    return [_task_job(task, name, ops, _upstream_hooks(task, hooks)) for task, name in named]


def _task_job(
    task: DormantTask, name: str, ops: Mapping[str, dg.OpDefinition], upstream: Sequence[DormantTask]
) -> dg.JobDefinition:
    @dg.job(name=name, description=_describe(task), tags=_tags(task), metadata=task.metadata())
    def _job() -> None:
        done: dict[str, object] = {}
        for hook in upstream:
            done[hook.runtime_task.hook_id] = _after(ops[hook.label], [done[d] for d in hook.upstream_hooks])
        _after(ops[task.label], [done[d] for d in task.upstream_hooks])

    return _job


def _after(op: dg.OpDefinition, upstream: list) -> object:
    return op(after=upstream) if upstream else op()


def _upstream_hooks(task: DormantTask, hooks: Mapping[tuple[str, str], DormantTask]) -> list[DormantTask]:
    """The pre-hooks `task` runs after, transitively, in the workload's hook order."""
    workload = task.runtime_task.workload_id
    needed: set[str] = set()
    pending = list(task.upstream_hooks)
    while pending:
        hook_id = pending.pop()
        if hook_id not in needed:
            needed.add(hook_id)
            pending.extend(hooks[(workload, hook_id)].upstream_hooks)
    return [hooks[(workload, hook_id)] for hook_id in task.hook_order if hook_id in needed]


def _tags(task: DormantTask) -> dict[str, str]:
    return {
        f"{TAG_PREFIX}family": task.family,
        f"{TAG_PREFIX}task_kind": task.kind.value,
        f"{TAG_PREFIX}workload": task.runtime_task.workload_id[:255],
        f"{TAG_PREFIX}dormant": "false" if task.family == SYNTHETIC_FAMILY else "true",
        # Every run carries the workspace its deployment acts for (the same tag the main location's runs carry).
        f"{TAG_PREFIX}workspace": load_config().workspace,
    }


def _start_op(task: DormantTask, name: str, runtime: DeploymentRuntime, family: FamilyRelease) -> dg.OpDefinition:
    """The op that asks the standard runtime to start `task` once every op wired to `after` has succeeded."""

    @dg.op(name=f"start__{name}", description=_describe(task), tags=_tags(task), ins={"after": dg.In(dg.Nothing)})
    def start_task(context: OpExecutionContext) -> dg.Output:
        states = ReleaseStateMachine(open_store(runtime.settings.control_store_url), runtime.clock)
        launcher = runtime_launcher(
            ledger=runtime.ledger,
            run_id=context.run_id,
            release=family.release,
            task=task.runtime_task,
            clock=runtime.clock,
            epochs=runtime.target,
            target=runtime.target,
            env_name=runtime.settings.connection_env_name,
            lake_dir=family.lake_dir,
            recorder=ReleaseDenials(states, run_id=context.run_id, origin=DENIAL_ORIGIN),
        )
        try:
            result = launcher.launch(family.view, task.runtime_task)
        except ExecutionDeniedError as denied:
            raise _denial_failure(context, denied, runtime) from None
        except DponeError as error:
            raise dg.Failure(
                description=str(error),
                metadata={"error_code": error.code, **_counts(context, runtime)},
                allow_retries=False,
            ) from None
        counts = _counts(context, runtime)
        context.instance.add_run_tags(
            context.run_id,
            {
                f"{TAG_PREFIX}admission": "admitted",
                f"{TAG_PREFIX}release_id": result.grant.release_id,
                f"{TAG_PREFIX}credential_resolutions": str(counts["credential_resolutions"]),
            },
        )
        outcome: WriteOutcome = result.outcome
        metadata: dict[str, dg.RawMetadataValue] = {
            **result.grant.as_metadata(),
            **counts,
            "statements": outcome.statements,
            **{f"rows: {relation}": rows for relation, rows in sorted(outcome.rows.items())},
        }
        return dg.Output(None, metadata=metadata)

    return start_task


def _counts(context: OpExecutionContext, runtime: DeploymentRuntime) -> dict[str, int]:
    uses = runtime.ledger.entries(run_id=context.run_id)
    return {
        "credential_resolutions": sum(1 for entry in uses if entry["port"] == "credentials"),
        "runtime_port_uses": len(uses),
    }


def _denial_failure(
    context: OpExecutionContext, denied: ExecutionDeniedError, runtime: DeploymentRuntime
) -> dg.Failure:
    denial = denied.denial
    context.instance.add_run_tags(
        context.run_id,
        {
            f"{TAG_PREFIX}admission": "denied",
            f"{TAG_PREFIX}denial_reason": denial.reason.value,
            f"{TAG_PREFIX}release_id": denial.release_id,
            f"{TAG_PREFIX}authority_expires_at": denial.authority_expires_at,
            f"{TAG_PREFIX}denial_recorded": "control_store",
        },
    )
    metadata: dict[str, dg.RawMetadataValue] = {
        **denial.as_metadata(),
        "error_code": denied.code,
        **_counts(context, runtime),
    }
    return dg.Failure(description=str(denied), metadata=metadata, allow_retries=False)


def _describe(task: DormantTask) -> str:
    if task.family == SYNTHETIC_FAMILY:
        lines = [
            (
                f"Synthetic-family {task.kind.value} task `{task.label}`: runs for real in the synthetic runtime's "
                "own lake."
            )
        ]
        lines.append("Admitted by the standard runtime only on a synthetic target; credentials are resolved by alias.")
    else:
        lines = [f"Dormant {task.kind.value} task `{task.label}` of the installed development release."]
        lines.append(
            "Launching it is refused by the standard runtime admission before any credential, source or writer."
        )
    lines.extend(f"- {key}: {value}" for key, value in task.metadata().items())
    return "\n".join(lines)
