"""The per-release state machine Checked → Composed → Published → Installed → Denied, in the control store.

Allowed changes are exactly the design's edges, plus Denied → Installed (an identical delivery
retry changes no bytes). Asking for a state the release has already passed (publishing again a
release that is Installed) is recorded as an `unchanged` event and leaves the state alone, so an
identical retry of the whole pipeline never moves a release backwards. Attempts that failed are
recorded as events too (`uncertain`, `refused`) without changing state.

`ReleaseDenials` persists each standard-runtime refusal (a `DenialRecorder`): one `runtime_denials`
row, then `deny()`, which moves an Installed release to Denied, or, for a release not yet installed
(the rollout gate evaluates before activation), records a `denied` event without changing state.

What a reader could get wrong: Denied is the expected final state of every healthy development
release (the standard runtime refuses its tasks), not an error.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.canonical import dumps
from dpone_dagster.contracts.identity import require_digest
from dpone_dagster.control.release_tables import release_events, release_states
from dpone_dagster.control.runtime_tables import runtime_denials
from dpone_dagster.release.errors import StateTransitionError


class ReleaseState(enum.StrEnum):
    CHECKED = "Checked"
    COMPOSED = "Composed"
    PUBLISHED = "Published"
    INSTALLED = "Installed"
    DENIED = "Denied"


_ORDER = list(ReleaseState)
_EDGES: frozenset[tuple[ReleaseState | None, ReleaseState]] = frozenset(
    {
        (None, ReleaseState.CHECKED),
        (ReleaseState.CHECKED, ReleaseState.COMPOSED),
        (ReleaseState.COMPOSED, ReleaseState.PUBLISHED),
        (ReleaseState.PUBLISHED, ReleaseState.INSTALLED),
        (ReleaseState.INSTALLED, ReleaseState.DENIED),
        (ReleaseState.DENIED, ReleaseState.INSTALLED),
    }
)


@dataclass(frozen=True)
class ReleaseEvent:
    release_id: str
    from_state: ReleaseState | None
    to_state: ReleaseState
    outcome: str
    recorded_at: str
    detail: str


class ReleaseStateMachine:
    """Records and reads release states. One engine, one injected clock."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    def current(self, release_id: str) -> ReleaseState | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(release_states.c.state).where(release_states.c.release_id == require_digest(release_id))
            ).first()
        return ReleaseState(row[0]) if row else None

    def advance(self, release_id: str, to: ReleaseState, **detail: str | int | bool) -> ReleaseState:
        """Move `release_id` to `to` (or record `unchanged` if it already passed `to`); return the state."""
        require_digest(release_id)
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(release_states.c.state, release_states.c.version).where(
                    release_states.c.release_id == release_id
                )
            ).first()
            current = ReleaseState(row[0]) if row else None
            if (current, to) not in _EDGES:
                if current is not None and _ORDER.index(current) >= _ORDER.index(to):
                    self._event(conn, release_id, current, to, "unchanged", detail)
                    return current
                raise StateTransitionError(
                    "release.state_transition_invalid",
                    f"a release in state {current or 'none'} cannot become {to}",
                )
            now = format_timestamp(self.clock.now())
            if row is None:
                conn.execute(release_states.insert().values(release_id=release_id, state=to, version=1, updated_at=now))
            else:
                changed = conn.execute(
                    release_states.update()
                    .where(release_states.c.release_id == release_id, release_states.c.version == row[1])
                    .values(state=to, version=row[1] + 1, updated_at=now)
                ).rowcount
                if changed != 1:
                    raise StateTransitionError(
                        "release.state_transition_invalid", "the release state changed concurrently; retry"
                    )
            self._event(conn, release_id, current, to, "recorded", detail)
            return to

    def note(self, release_id: str, attempted: ReleaseState, outcome: str, **detail: str | int | bool) -> None:
        """Record an attempt that did not change state (`uncertain`, `refused`)."""
        require_digest(release_id)
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(release_states.c.state).where(release_states.c.release_id == release_id)
            ).first()
            self._event(conn, release_id, row[0] if row else None, attempted, outcome, detail)

    def deny(self, release_id: str, **detail: str | int | bool) -> ReleaseState | None:
        """A runtime refusal: Installed → Denied (or unchanged if Denied); before installation, an event only."""
        current = self.current(release_id)
        if current in (ReleaseState.INSTALLED, ReleaseState.DENIED):
            return self.advance(release_id, ReleaseState.DENIED, **detail)
        self.note(release_id, ReleaseState.DENIED, "denied", **detail)
        return current

    def history(self, release_id: str) -> list[ReleaseEvent]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(release_events)
                .where(release_events.c.release_id == require_digest(release_id))
                .order_by(release_events.c.event_id)
            ).all()
        return [
            ReleaseEvent(
                release_id=row.release_id,
                from_state=ReleaseState(row.from_state) if row.from_state else None,
                to_state=ReleaseState(row.to_state),
                outcome=row.outcome,
                recorded_at=row.recorded_at,
                detail=row.detail,
            )
            for row in rows
        ]

    def _event(self, conn, release_id, from_state, to_state, outcome, detail) -> None:
        conn.execute(
            release_events.insert().values(
                release_id=release_id,
                from_state=from_state,
                to_state=to_state,
                outcome=outcome,
                recorded_at=format_timestamp(self.clock.now()),
                detail=dumps(dict(detail)).decode("utf-8"),
            )
        )


@dataclass(frozen=True)
class DenialRecord:
    release_id: str
    run_id: str
    origin: str
    task_kind: str
    workload_id: str
    hook_id: str
    reason: str
    authority_expires_at: str
    recorded_at: str


class ReleaseDenials:
    """A `DenialRecorder` that persists each refusal of one run (or gate evaluation) in the control store."""

    def __init__(self, states: ReleaseStateMachine, *, run_id: str, origin: str) -> None:
        self.states = states
        self.run_id = run_id
        self.origin = origin

    def record(self, denial) -> None:
        """Persist `denial` (an `AdmissionDenial`), then move the release state (see `ReleaseStateMachine.deny`)."""
        task = denial.task
        with self.states.engine.begin() as conn:
            conn.execute(
                runtime_denials.insert().values(
                    release_id=require_digest(denial.release_id),
                    run_id=self.run_id[:64],
                    origin=self.origin,
                    task_kind=task.kind.value,
                    workload_id=task.workload_id[:512],
                    hook_id=(task.hook_id or "")[:128],
                    reason=denial.reason.value,
                    authority_expires_at=denial.authority_expires_at,
                    recorded_at=format_timestamp(self.states.clock.now()),
                )
            )
        self.states.deny(denial.release_id, reason=denial.reason.value, task=task.kind.value, origin=self.origin)

    def records(self, *, release_id: str | None = None, run_id: str | None = None) -> list[DenialRecord]:
        query = sa.select(runtime_denials).order_by(runtime_denials.c.denial_id)
        if release_id is not None:
            query = query.where(runtime_denials.c.release_id == release_id)
        if run_id is not None:
            query = query.where(runtime_denials.c.run_id == run_id)
        with self.states.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            DenialRecord(**{name: getattr(row, name) for name in DenialRecord.__dataclass_fields__}) for row in rows
        ]
