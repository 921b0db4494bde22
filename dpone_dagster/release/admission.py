"""Runtime admission: the standard runtime refuses every development-family task, first.

`admit(release, task)` is a pure decision over an installed release's sealed projection: it returns
an `AdmissionDenial` (typed reason code, release identity, authority expiry) for native, ordinary
and pre-hook tasks alike. In this increment there is no admitted outcome for the development
family: delivery never implies execution. `StandardRuntimeLauncher` is the runtime entry point that
calls `admit` *before* init-fetch, credential resolution, source access or writer issuance, so a
dormant workload never reaches any of those ports.

What a reader could get wrong: expiry and revocation do not make a release unreadable. They change
the denial reason (and block new delivery attempts elsewhere); the installed bytes, the audit log
and the state history stay readable as historical evidence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.release.bundle import ReleaseBundle

DEVELOPMENT_FAMILY = "development"


class TaskKind(enum.StrEnum):
    NATIVE = "native"
    ORDINARY = "ordinary"
    PRE_HOOK = "pre_hook"


@dataclass(frozen=True)
class RuntimeTask:
    """One task the orchestrator asks to start: a dbt node, a flow runtime, or a SQL pre-hook."""

    kind: TaskKind
    workload_id: str
    hook_id: str | None = None
    publish_xcom: bool = False


@dataclass(frozen=True)
class AdmissionView:
    """What admission reads from an installed release's integrity-checked projection."""

    release_id: str
    authority_family: str
    authority_expires_at: datetime
    revocation_epoch: int
    tasks: frozenset[RuntimeTask] = field(default_factory=frozenset)


class DenialReason(enum.StrEnum):
    DEVELOPMENT_DORMANT = "admission.development_dormant"
    AUTHORITY_EXPIRED = "admission.authority_expired"
    AUTHORITY_REVOKED = "admission.authority_revoked"
    UNKNOWN_TASK = "admission.unknown_task"
    TASK_SHAPE_INVALID = "admission.task_shape_invalid"
    UNKNOWN_FAMILY = "admission.unknown_family"


_REASON_TEXT = {
    DenialReason.DEVELOPMENT_DORMANT: "development releases are delivered dormant; the standard runtime executes none of their tasks",
    DenialReason.AUTHORITY_EXPIRED: "the release's development authority has expired; no new attempt may start",
    DenialReason.AUTHORITY_REVOKED: "the release's development authority was revoked (the revocation epoch moved on)",
    DenialReason.UNKNOWN_TASK: "the task is not a member of the installed release",
    DenialReason.TASK_SHAPE_INVALID: "a pre-hook task must keep publish_xcom=false and name its hook",
    DenialReason.UNKNOWN_FAMILY: "the release belongs to no family the standard runtime knows",
}


@dataclass(frozen=True)
class AdmissionDenial:
    """A typed refusal an operator can read: why, which release, until when its authority ran."""

    reason: DenialReason
    message: str
    release_id: str
    task: RuntimeTask
    authority_expires_at: str

    def as_metadata(self) -> dict[str, str]:
        return {
            "reason": self.reason.value,
            "message": self.message,
            "release_id": self.release_id,
            "task_kind": self.task.kind.value,
            "workload_id": self.task.workload_id,
            "hook_id": self.task.hook_id or "",
            "authority_expires_at": self.authority_expires_at,
        }


def admit(release: AdmissionView, task: RuntimeTask, *, now: datetime, current_revocation_epoch: int) -> AdmissionDenial:
    """Decide admission of `task`. Every development-family task is denied; the reason is the most specific."""
    reason = _reason(release, task, now=now, current_revocation_epoch=current_revocation_epoch)
    return AdmissionDenial(
        reason=reason,
        message=_REASON_TEXT[reason],
        release_id=release.release_id,
        task=task,
        authority_expires_at=format_timestamp(release.authority_expires_at),
    )


def _reason(release: AdmissionView, task: RuntimeTask, *, now: datetime, current_revocation_epoch: int) -> DenialReason:
    if release.authority_family != DEVELOPMENT_FAMILY:
        return DenialReason.UNKNOWN_FAMILY
    if task.kind is TaskKind.PRE_HOOK and (task.publish_xcom or not task.hook_id):
        return DenialReason.TASK_SHAPE_INVALID
    if task not in release.tasks:
        return DenialReason.UNKNOWN_TASK
    if current_revocation_epoch != release.revocation_epoch:
        return DenialReason.AUTHORITY_REVOKED
    if now >= release.authority_expires_at:
        return DenialReason.AUTHORITY_EXPIRED
    return DenialReason.DEVELOPMENT_DORMANT


class ExecutionDeniedError(CodedError):
    codes = {
        "release.execution_denied": "The standard runtime refused to start a development-family task; see the denial reason. Delivery never implies execution.",
    }

    def __init__(self, denial: AdmissionDenial) -> None:
        super().__init__("release.execution_denied", f"{denial.reason.value}: {denial.message}")
        self.denial = denial


class InitFetcher(Protocol):
    def fetch(self, release_id: str, task: RuntimeTask) -> Any: ...


class CredentialResolver(Protocol):
    def resolve(self, alias: str) -> Any: ...


class RuntimeSourceReader(Protocol):
    def read(self, release_id: str, path: str) -> bytes: ...


class WriterIssuer(Protocol):
    def issue(self, release_id: str, task: RuntimeTask) -> Any: ...


class DenialRecorder(Protocol):
    def record(self, denial: AdmissionDenial) -> None: ...


class RevocationEpochSource(Protocol):
    def current_epoch(self) -> int: ...


@dataclass
class StandardRuntimeLauncher:
    """The standard runtime's start path. Admission runs before any port below it is touched.

    The execution path past admission (init-fetch, credentials, source, writer) is deliberately
    absent for the development family: it needs a separately reviewed protected-entrypoint contract.
    The ports are held so that tests can prove none of them is ever called.
    """

    clock: Clock
    epochs: RevocationEpochSource
    init_fetcher: InitFetcher
    credentials: CredentialResolver
    sources: RuntimeSourceReader
    writers: WriterIssuer
    recorder: DenialRecorder | None = None

    def launch(self, release: AdmissionView, task: RuntimeTask) -> Any:
        denial = admit(release, task, now=self.clock.now(), current_revocation_epoch=self.epochs.current_epoch())
        if self.recorder is not None:
            self.recorder.record(denial)
        raise ExecutionDeniedError(denial)


def admission_view(bundle: ReleaseBundle, *, authority_expires_at: datetime, revocation_epoch: int) -> AdmissionView:
    """The tasks an installed release would expose to the runtime, from its verified projection."""
    tasks = {RuntimeTask(TaskKind.NATIVE, uid) for uid in bundle.native_membership}
    for workload in bundle.ordinary:
        tasks.add(RuntimeTask(TaskKind.ORDINARY, workload.pack_id))
        tasks.update(RuntimeTask(TaskKind.PRE_HOOK, workload.pack_id, hook.hook_id, hook.publish_xcom) for hook in workload.hooks)
    return AdmissionView(
        release_id=bundle.release_id,
        authority_family=bundle.parent.authority_family,
        authority_expires_at=authority_expires_at,
        revocation_epoch=revocation_epoch,
        tasks=frozenset(tasks),
    )
