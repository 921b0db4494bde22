"""The release state machine in the control store, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from dpone_dagster.authority.memory import FixedClock
from dpone_dagster.authority.synthetic import SYNTHETIC_EPOCH_START
from dpone_dagster.authority.verification import ReconstructedSource
from dpone_dagster.control.store import open_store
from dpone_dagster.release.errors import StateTransitionError
from dpone_dagster.release.state import ReleaseState, ReleaseStateMachine

RELEASE = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


@pytest.fixture(params=["sqlite", "postgres"])
def machine(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'control.sqlite'}"
    else:
        server = request.getfixturevalue("postgres_server")
        url = server.url(request.getfixturevalue("pg_database"))
    return ReleaseStateMachine(open_store(url), FixedClock(SYNTHETIC_EPOCH_START))


def walk(machine, release=RELEASE):
    for state in ReleaseState:
        machine.advance(release, state)


def test_the_happy_path_is_recorded_in_order(machine):
    walk(machine)
    assert machine.current(RELEASE) is ReleaseState.DENIED
    history = machine.history(RELEASE)
    assert [(e.from_state, e.to_state) for e in history] == [
        (None, ReleaseState.CHECKED),
        (ReleaseState.CHECKED, ReleaseState.COMPOSED),
        (ReleaseState.COMPOSED, ReleaseState.PUBLISHED),
        (ReleaseState.PUBLISHED, ReleaseState.INSTALLED),
        (ReleaseState.INSTALLED, ReleaseState.DENIED),
    ]
    assert all(e.outcome == "recorded" and e.recorded_at == "2026-01-05T09:00:00Z" for e in history)
    assert machine.current(OTHER) is None and machine.history(OTHER) == []


def test_an_identical_retry_moves_denied_back_to_installed_and_never_backwards(machine):
    walk(machine)
    assert machine.advance(RELEASE, ReleaseState.CHECKED) is ReleaseState.DENIED
    assert machine.advance(RELEASE, ReleaseState.PUBLISHED) is ReleaseState.DENIED
    assert machine.advance(RELEASE, ReleaseState.INSTALLED) is ReleaseState.INSTALLED
    assert machine.advance(RELEASE, ReleaseState.DENIED) is ReleaseState.DENIED
    outcomes = [e.outcome for e in machine.history(RELEASE)[5:]]
    assert outcomes == ["unchanged", "unchanged", "recorded", "recorded"]


@pytest.mark.parametrize(
    "to", [ReleaseState.COMPOSED, ReleaseState.PUBLISHED, ReleaseState.INSTALLED, ReleaseState.DENIED]
)
def test_skipping_a_state_is_refused(machine, to):
    with pytest.raises(StateTransitionError) as raised:
        machine.advance(RELEASE, to)
    assert raised.value.code == "release.state_transition_invalid"
    assert machine.current(RELEASE) is None


def test_failed_attempts_are_noted_without_changing_state(machine):
    machine.advance(RELEASE, ReleaseState.CHECKED)
    machine.advance(RELEASE, ReleaseState.COMPOSED)
    machine.note(RELEASE, ReleaseState.PUBLISHED, "uncertain", code="release.durability_uncertain")
    assert machine.current(RELEASE) is ReleaseState.COMPOSED
    last = machine.history(RELEASE)[-1]
    assert (last.outcome, last.to_state) == ("uncertain", ReleaseState.PUBLISHED)
    assert json.loads(last.detail) == {"code": "release.durability_uncertain"}


def test_a_malformed_release_id_is_refused(machine):
    with pytest.raises(Exception) as raised:
        machine.advance("not-a-digest", ReleaseState.CHECKED)
    assert raised.value.code == "identity.invalid_digest"


# ---------------------------------------------------------------------------------------------
# the pipeline records each state when it is reached (issue 20 item 9)


class _DriftingSource:
    """A verified source whose reread bytes of one file differ from what capture recorded."""

    def __init__(self, source, victim: str) -> None:
        self.source, self.victim = source, victim

    @property
    def snapshot(self):
        return self.source.snapshot

    def read_bytes(self, path: str) -> bytes:
        data = self.source.read_bytes(path)
        return data + b"-- drifted\n" if path == self.victim else data


def _pipeline(tmp_path):
    from tests.release.fabricated import SyntheticTarget, synthetic_release
    from tests.release.real_pipeline import pipeline_for

    target = SyntheticTarget()
    release = synthetic_release(target)
    pipeline = pipeline_for(target, tmp_path)
    pipeline.states = ReleaseStateMachine(open_store(f"sqlite:///{tmp_path / 'control.sqlite'}"), target.clock)
    return target, release, pipeline


def test_checked_is_recorded_before_composition_and_composed_after(tmp_path):
    _, release, pipeline = _pipeline(tmp_path)
    victim = release.ordinary.workloads[0].sql[0].path
    drifting = _DriftingSource(release.source, victim)
    with pytest.raises(Exception) as refused:
        pipeline.compose(authority=release.authority, source=drifting, native=release.native, ordinary=release.ordinary)
    assert refused.value.code == "release.source_closure_mismatch"
    release_id = release.bundle.release_id
    assert pipeline.states.current(release_id) is ReleaseState.CHECKED
    checked, attempt = pipeline.states.history(release_id)
    assert (checked.from_state, checked.to_state, checked.outcome) == (None, ReleaseState.CHECKED, "recorded")
    assert json.loads(checked.detail) == {
        "native": len(release.native.membership),
        "ordinary": len(release.ordinary.workloads),
    }
    assert (attempt.to_state, attempt.outcome, json.loads(attempt.detail)) == (
        ReleaseState.COMPOSED,
        "refused",
        {"code": "release.source_closure_mismatch"},
    )

    bundle = pipeline.compose(
        authority=release.authority, source=release.source, native=release.native, ordinary=release.ordinary
    )
    assert bundle.release_id == release_id and pipeline.states.current(release_id) is ReleaseState.COMPOSED
    composed = pipeline.states.history(release_id)[-1]
    assert (composed.from_state, composed.to_state, composed.outcome) == (
        ReleaseState.CHECKED,
        ReleaseState.COMPOSED,
        "recorded",
    )


def test_effective_limits_take_the_workload_term(tmp_path):
    """min(policy, grant, workload): a grant larger than the delivery does not widen what may be delivered."""
    from dpone_dagster.contracts.grant import ExecutionSubject
    from dpone_dagster.release.pipeline import workload_limits

    target, release, pipeline = _pipeline(tmp_path)
    authority = release.authority
    grant = target.authority.grant(
        native_membership=list(authority.native_membership),
        ordinary_membership=list(authority.ordinary_membership),
        execution_subjects=sorted(authority.execution_subjects, key=ExecutionSubject.sort_key),
        max_workloads=authority.effective_limits.max_workloads + 50,
        sequence=2,
    )
    source = ReconstructedSource(
        repository=authority.source_repository,
        commit=authority.source_commit,
        native_membership=list(authority.native_membership),
        ordinary_membership=list(authority.ordinary_membership),
        source_bytes=release.bundle.source_bytes,
        peak_cpu_millicores=300,
        peak_memory_bytes=256 * 1024**2,
    )
    receipt = pipeline.verify_authority(*target.authority.signed(grant), source)
    workloads = len(source.native_membership) + len(source.ordinary_membership)
    assert grant.max_workloads > workloads
    assert receipt.effective_limits == workload_limits(source)
    assert (receipt.effective_limits.max_workloads, receipt.effective_limits.max_source_bytes) == (
        workloads,
        source.source_bytes,
    )
    assert (receipt.effective_limits.max_cpu_millicores, receipt.effective_limits.max_memory_bytes) == (
        300,
        256 * 1024**2,
    )
