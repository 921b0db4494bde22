"""Runtime admission: the standard runtime decides first, and refuses every development-family task.

`admit(release, task)` is a pure decision over an installed release's sealed projection. For the
development family it is always an `AdmissionDenial` (typed reason code, release identity, authority
expiry) for native, ordinary and pre-hook tasks alike: delivery never implies execution. The only
admitted outcome (`AdmissionGrant`) is for an ordinary or pre-hook task that is a member of a
*synthetic-family* release, on a target the platform declared synthetic. Every other family is
`admission.unknown_family`.

`StandardRuntimeLauncher.launch` calls `admit` *before* init-fetch, credential resolution, source
access or writer issuance; only a grant goes on, through those four injected ports in that order:
init-fetch says which connection aliases and release files the task needs, each alias's credential
is resolved, each file is read, and the issued writer runs the statements.

A view is sealed by the reader that made it from a verified release (`sealed_view`: an HMAC under a
key drawn when this module is imported, held in this process's memory only, as receipt seals are).
`admit` denies every task of an unsealed or altered view first (`admission.view_unauthenticated`): a
view built by hand, or copied with `dataclasses.replace` (say, a development release's id and tasks
relabelled `synthetic`), never reaches the synthetic grant and so never runs development SQL.

What a reader could get wrong: expiry and revocation do not make a release unreadable. They change
the denial reason (and block new delivery attempts elsewhere); the installed bytes, the audit log
and the state history stay readable as historical evidence. And a grant is never a development
authority: the synthetic family has its own documents, which no development or production reader
accepts.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.release.build.bundle import ReleaseBundle

DEVELOPMENT_FAMILY = "development"
SYNTHETIC_FAMILY = "synthetic"
NO_AUTHORITY_EXPIRY = "(none: synthetic family)"


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
    authority_expires_at: datetime | None
    revocation_epoch: int
    tasks: frozenset[RuntimeTask] = field(default_factory=frozenset)
    seal: bytes = field(default=b"", compare=False, repr=False)
    """Set by `sealed_view` only; `admit` denies a view whose seal does not match its fields."""


_VIEW_SEAL_KEY = secrets.token_bytes(32)
_VIEW_SEAL_DOMAIN = b"dpone.admission-view-seal.v1\x00"


def _view_mac(view: AdmissionView) -> bytes:
    expires = format_timestamp(view.authority_expires_at) if view.authority_expires_at is not None else ""
    tasks = sorted((t.kind.value, t.workload_id, t.hook_id or "", str(t.publish_xcom)) for t in view.tasks)
    fields = [view.release_id, view.authority_family, expires, str(view.revocation_epoch)]
    fields += ["\x1f".join(task) for task in tasks]
    body = _VIEW_SEAL_DOMAIN + "\x00".join(fields).encode("utf-8")
    return hmac.new(_VIEW_SEAL_KEY, body, hashlib.sha256).digest()


def sealed_view(
    release_id: str,
    authority_family: str,
    authority_expires_at: datetime | None,
    revocation_epoch: int,
    tasks: frozenset[RuntimeTask],
) -> AdmissionView:
    """The one way a verified release's reader makes the view admission accepts."""
    view = AdmissionView(release_id, authority_family, authority_expires_at, revocation_epoch, frozenset(tasks))
    return AdmissionView(
        release_id, authority_family, authority_expires_at, revocation_epoch, view.tasks, seal=_view_mac(view)
    )


def view_is_sealed(view: object) -> bool:
    """True only for a view `sealed_view` made in this process whose fields have not changed since."""
    return (
        isinstance(view, AdmissionView)
        and isinstance(view.seal, bytes)
        and hmac.compare_digest(view.seal, _view_mac(view))
    )


class DenialReason(enum.StrEnum):
    VIEW_UNAUTHENTICATED = "admission.view_unauthenticated"
    DEVELOPMENT_DORMANT = "admission.development_dormant"
    AUTHORITY_EXPIRED = "admission.authority_expired"
    AUTHORITY_REVOKED = "admission.authority_revoked"
    UNKNOWN_TASK = "admission.unknown_task"
    TASK_SHAPE_INVALID = "admission.task_shape_invalid"
    UNKNOWN_FAMILY = "admission.unknown_family"
    SYNTHETIC_TARGET_REQUIRED = "admission.synthetic_target_required"


_REASON_TEXT = {
    DenialReason.VIEW_UNAUTHENTICATED: (
        "the release view was not made from a verified release in this process (built by hand, or changed after)"
    ),
    DenialReason.DEVELOPMENT_DORMANT: (
        "development releases are delivered dormant; the standard runtime executes none of their tasks"
    ),
    DenialReason.AUTHORITY_EXPIRED: "the release's development authority has expired; no new attempt may start",
    DenialReason.AUTHORITY_REVOKED: "the release's development authority was revoked (the revocation epoch moved on)",
    DenialReason.UNKNOWN_TASK: "the task is not a member of the installed release",
    DenialReason.TASK_SHAPE_INVALID: "a pre-hook task must keep publish_xcom=false and name its hook",
    DenialReason.UNKNOWN_FAMILY: "the release belongs to no family the standard runtime knows",
    DenialReason.SYNTHETIC_TARGET_REQUIRED: (
        "synthetic-family tasks run only on a target the platform declared synthetic"
    ),
}
SYNTHETIC_ADMITTED = "admission.synthetic_admitted"


@dataclass(frozen=True)
class AdmissionDenial:
    """A typed refusal an operator can read: why, which release, until when its authority ran."""

    reason: DenialReason
    message: str
    release_id: str
    task: RuntimeTask
    authority_expires_at: str
    admitted: bool = field(default=False, init=False)

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


@dataclass(frozen=True)
class AdmissionGrant:
    """The one admitted outcome: a member task of a synthetic-family release on a synthetic target."""

    release_id: str
    task: RuntimeTask
    family: str = SYNTHETIC_FAMILY
    reason: str = SYNTHETIC_ADMITTED
    admitted: bool = field(default=True, init=False)

    def as_metadata(self) -> dict[str, str]:
        return {
            "admission": self.reason,
            "family": self.family,
            "release_id": self.release_id,
            "task_kind": self.task.kind.value,
            "workload_id": self.task.workload_id,
            "hook_id": self.task.hook_id or "",
        }


AdmissionDecision = AdmissionDenial | AdmissionGrant


def admit(
    release: AdmissionView,
    task: RuntimeTask,
    *,
    now: datetime,
    current_revocation_epoch: int,
    synthetic_target: bool = False,
) -> AdmissionDecision:
    """Decide admission of `task`. Every development-family task is denied; the reason is the most specific."""
    if not view_is_sealed(release):
        reason = DenialReason.VIEW_UNAUTHENTICATED
    elif release.authority_family == SYNTHETIC_FAMILY:
        reason = _synthetic_reason(release, task, synthetic_target=synthetic_target)
        if reason is None:
            return AdmissionGrant(release_id=release.release_id, task=task)
    else:
        reason = _reason(release, task, now=now, current_revocation_epoch=current_revocation_epoch)
    expires = release.authority_expires_at
    return AdmissionDenial(
        reason=reason,
        message=_REASON_TEXT[reason],
        release_id=release.release_id,
        task=task,
        authority_expires_at=format_timestamp(expires) if expires is not None else NO_AUTHORITY_EXPIRY,
    )


def _synthetic_reason(release: AdmissionView, task: RuntimeTask, *, synthetic_target: bool) -> DenialReason | None:
    if task.kind is TaskKind.PRE_HOOK and (task.publish_xcom or not task.hook_id):
        return DenialReason.TASK_SHAPE_INVALID
    if task.kind is TaskKind.NATIVE or task not in release.tasks:
        return DenialReason.UNKNOWN_TASK
    if not synthetic_target:
        return DenialReason.SYNTHETIC_TARGET_REQUIRED
    return None


def _reason(release: AdmissionView, task: RuntimeTask, *, now: datetime, current_revocation_epoch: int) -> DenialReason:
    if release.authority_family != DEVELOPMENT_FAMILY:
        return DenialReason.UNKNOWN_FAMILY
    if task.kind is TaskKind.PRE_HOOK and (task.publish_xcom or not task.hook_id):
        return DenialReason.TASK_SHAPE_INVALID
    if task not in release.tasks:
        return DenialReason.UNKNOWN_TASK
    if current_revocation_epoch != release.revocation_epoch:
        return DenialReason.AUTHORITY_REVOKED
    if release.authority_expires_at is None or now >= release.authority_expires_at:
        return DenialReason.AUTHORITY_EXPIRED
    return DenialReason.DEVELOPMENT_DORMANT


class ExecutionDeniedError(CodedError):
    codes = {
        "release.execution_denied": (
            "The standard runtime refused to start a development-family task; see the denial "
            "reason. Delivery never implies execution."
        ),
    }

    def __init__(self, denial: AdmissionDenial) -> None:
        super().__init__("release.execution_denied", f"{denial.reason.value}: {denial.message}")
        self.denial = denial


@dataclass(frozen=True)
class TaskPlan:
    """What init-fetch returns for an admitted task: the aliases it connects with, the files it runs (in order)."""

    aliases: tuple[str, ...]
    source_paths: tuple[str, ...]


class InitFetcher(Protocol):
    def fetch(self, release_id: str, task: RuntimeTask) -> TaskPlan: ...


class CredentialResolver(Protocol):
    def resolve(self, alias: str) -> Any: ...


class RuntimeSourceReader(Protocol):
    def read(self, release_id: str, path: str) -> bytes: ...


class Writer(Protocol):
    def run(self, plan: TaskPlan, credentials: Mapping[str, Any], sources: Sequence[tuple[str, bytes]]) -> Any: ...


class WriterIssuer(Protocol):
    def issue(self, release_id: str, task: RuntimeTask) -> Writer: ...


class DenialRecorder(Protocol):
    def record(self, denial: AdmissionDenial) -> None: ...


class RevocationEpochSource(Protocol):
    def current_epoch(self) -> int: ...


class SyntheticTargetSource(Protocol):
    def synthetic_target(self) -> bool: ...


@dataclass(frozen=True)
class LaunchResult:
    grant: AdmissionGrant
    plan: TaskPlan
    outcome: Any


@dataclass
class StandardRuntimeLauncher:
    """The standard runtime's start path. Admission runs before any port below it is touched.

    A denial is recorded (when a recorder is injected) and raised as `release.execution_denied`;
    no port is called. A grant goes on: init-fetch, then one credential resolution per alias the
    plan names, then one source read per file, then writer issuance, and the writer runs.
    """

    clock: Clock
    epochs: RevocationEpochSource
    init_fetcher: InitFetcher
    credentials: CredentialResolver
    sources: RuntimeSourceReader
    writers: WriterIssuer
    recorder: DenialRecorder | None = None
    target: SyntheticTargetSource | None = None

    def decide(self, release: AdmissionView, task: RuntimeTask) -> AdmissionDecision:
        synthetic = (
            release.authority_family == SYNTHETIC_FAMILY and self.target is not None and self.target.synthetic_target()
        )
        return admit(
            release,
            task,
            now=self.clock.now(),
            current_revocation_epoch=self.epochs.current_epoch(),
            synthetic_target=synthetic,
        )

    def launch(self, release: AdmissionView, task: RuntimeTask) -> LaunchResult:
        decision = self.decide(release, task)
        if not isinstance(decision, AdmissionGrant):
            if self.recorder is not None:
                self.recorder.record(decision)
            raise ExecutionDeniedError(decision)
        plan = self.init_fetcher.fetch(release.release_id, task)
        credentials = {alias: self.credentials.resolve(alias) for alias in plan.aliases}
        sources = [(path, self.sources.read(release.release_id, path)) for path in plan.source_paths]
        writer = self.writers.issue(release.release_id, task)
        return LaunchResult(grant=decision, plan=plan, outcome=writer.run(plan, credentials, sources))


def admission_view(bundle: ReleaseBundle, *, authority_expires_at: datetime, revocation_epoch: int) -> AdmissionView:
    """The tasks an installed release would expose to the runtime, from its verified projection."""
    tasks = {RuntimeTask(TaskKind.NATIVE, uid) for uid in bundle.native_membership}
    for workload in bundle.ordinary:
        tasks.add(RuntimeTask(TaskKind.ORDINARY, workload.pack_id))
        tasks.update(
            RuntimeTask(TaskKind.PRE_HOOK, workload.pack_id, hook.hook_id, hook.publish_xcom) for hook in workload.hooks
        )
    return sealed_view(
        bundle.release_id, bundle.parent.authority_family, authority_expires_at, revocation_epoch, frozenset(tasks)
    )
