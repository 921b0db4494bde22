"""Runtime admission denies every development-family task before any credential, source or writer."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from dpone_dagster.authority.memory import FixedClock
from dpone_dagster.release.runtime.admission import (
    AdmissionView,
    DenialReason,
    ExecutionDeniedError,
    RuntimeTask,
    StandardRuntimeLauncher,
    TaskKind,
    admission_view,
    admit,
    sealed_view,
    view_is_sealed,
)
from dpone_dagster.release.runtime.synthetic_release import SyntheticBundle
from tests.release.fabricated import SyntheticTarget, synthetic_release

NOW = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
EXPIRES = NOW + timedelta(hours=23)


@pytest.fixture(scope="module")
def view():
    release = synthetic_release(SyntheticTarget())
    return admission_view(release.bundle, authority_expires_at=EXPIRES, revocation_epoch=0)


def every_task(view):
    return sorted(view.tasks, key=lambda task: (task.kind, task.workload_id, task.hook_id or ""))


def test_the_view_exposes_native_ordinary_and_pre_hook_tasks(view):
    kinds = {task.kind for task in view.tasks}
    assert kinds == {TaskKind.NATIVE, TaskKind.ORDINARY, TaskKind.PRE_HOOK}
    hooks = [task for task in view.tasks if task.kind is TaskKind.PRE_HOOK]
    assert {task.hook_id for task in hooks} == {"prepare", "clear_today"}
    assert all(task.publish_xcom is False for task in hooks)


def test_every_task_is_denied_with_reason_identity_and_expiry(view):
    for task in every_task(view):
        denial = admit(view, task, now=NOW, current_revocation_epoch=0)
        assert denial.reason is DenialReason.DEVELOPMENT_DORMANT
        assert denial.release_id == view.release_id
        assert denial.authority_expires_at == "2026-01-06T09:00:00Z"
        assert denial.as_metadata()["reason"] == "admission.development_dormant"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"now": EXPIRES}, DenialReason.AUTHORITY_EXPIRED),
        ({"current_revocation_epoch": 1}, DenialReason.AUTHORITY_REVOKED),
    ],
)
def test_expiry_and_revocation_change_the_reason(view, change, reason):
    task = every_task(view)[0]
    arguments = {"now": NOW, "current_revocation_epoch": 0, **change}
    assert admit(view, task, **arguments).reason is reason


def test_unknown_tasks_and_bad_pre_hook_shapes_are_denied(view):
    assert (
        admit(view, RuntimeTask(TaskKind.ORDINARY, "not_a_member"), now=NOW, current_revocation_epoch=0).reason
        is DenialReason.UNKNOWN_TASK
    )
    hook = next(task for task in view.tasks if task.kind is TaskKind.PRE_HOOK)
    loud = RuntimeTask(TaskKind.PRE_HOOK, hook.workload_id, hook.hook_id, publish_xcom=True)
    assert admit(view, loud, now=NOW, current_revocation_epoch=0).reason is DenialReason.TASK_SHAPE_INVALID


def test_a_release_of_an_unknown_family_is_denied(view):
    other = sealed_view(view.release_id, "production", EXPIRES, 0, view.tasks)
    assert admit(other, every_task(view)[0], now=NOW, current_revocation_epoch=0).reason is DenialReason.UNKNOWN_FAMILY


class Spy:
    """Records every call; a launched development task must never reach one."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args))
            return b""

        return record


class Epochs:
    def current_epoch(self) -> int:
        return 0


def test_the_launcher_denies_before_init_fetch_credentials_source_or_writer(view):
    spies = {name: Spy() for name in ("init_fetcher", "credentials", "sources", "writers")}
    denials = []

    class Recorder:
        def record(self, denial):
            denials.append(denial)

    launcher = StandardRuntimeLauncher(clock=FixedClock(NOW), epochs=Epochs(), recorder=Recorder(), **spies)
    for task in every_task(view):
        with pytest.raises(ExecutionDeniedError) as raised:
            launcher.launch(view, task)
        assert raised.value.code == "release.execution_denied"
        assert raised.value.denial.task == task
    assert len(denials) == len(view.tasks)
    assert {name: spy.calls for name, spy in spies.items()} == {name: [] for name in spies}


class SyntheticTargetHere:
    def synthetic_target(self) -> bool:
        return True


def test_a_hand_built_or_relabelled_view_is_denied_before_any_port(view):
    """A development release's id and tasks relabelled `synthetic` would be admitted if admission trusted
    the view it is handed; only a view sealed by a verified reader of this process is read."""
    ordinary = next(task for task in every_task(view) if task.kind is TaskKind.ORDINARY)
    spies = {name: Spy() for name in ("init_fetcher", "credentials", "sources", "writers")}
    launcher = StandardRuntimeLauncher(clock=FixedClock(NOW), epochs=Epochs(), target=SyntheticTargetHere(), **spies)
    hand_built = AdmissionView(view.release_id, "synthetic", None, 0, view.tasks)
    relabelled = dataclasses.replace(view, authority_family="synthetic", authority_expires_at=None)
    for forged in (hand_built, relabelled):
        assert not view_is_sealed(forged)
        with pytest.raises(ExecutionDeniedError) as raised:
            launcher.launch(forged, ordinary)
        assert raised.value.denial.reason is DenialReason.VIEW_UNAUTHENTICATED
    assert {name: spy.calls for name, spy in spies.items()} == {name: [] for name in spies}
    # the same fields sealed by the reader are admitted: the seal is the only difference
    sealed = sealed_view(view.release_id, "synthetic", None, 0, view.tasks)
    assert admit(sealed, ordinary, now=NOW, current_revocation_epoch=0, synthetic_target=True).admitted


def test_a_synthetic_bundle_built_by_hand_gives_an_unsealed_view(view):
    hand_built = SyntheticBundle(view.release_id, parent=None, ordinary=(), members={})  # type: ignore[arg-type]
    assert not view_is_sealed(hand_built.admission_view())
