"""The release state machine in the control store, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from dpone_dagster.authority.memory import FixedClock
from dpone_dagster.authority.synthetic import SYNTHETIC_EPOCH_START
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


@pytest.mark.parametrize("to", [ReleaseState.COMPOSED, ReleaseState.PUBLISHED, ReleaseState.INSTALLED, ReleaseState.DENIED])
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
