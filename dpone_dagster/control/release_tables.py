"""Control-store tables of the release state machine: one row per release, one row per event.

`release_states` holds the current state of each release (optimistic `version` for concurrent
writers); `release_events` is the append-only history an operator reads ("why is this release
Denied, when was it published, which attempt was uncertain"). Details are canonical JSON with no
secret, no private path and no SQL. What a reader could get wrong: `release_events` also records
attempts that changed nothing (`outcome` = `unchanged`, `uncertain`, `refused`); only `recorded`
rows are state changes.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

release_states = sa.Table(
    "release_states",
    METADATA,
    sa.Column("release_id", sa.String(71), primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.String(20), nullable=False),
)

release_events = sa.Table(
    "release_events",
    METADATA,
    sa.Column("event_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("release_id", sa.String(71), nullable=False, index=True),
    sa.Column("from_state", sa.String(16), nullable=True),
    sa.Column("to_state", sa.String(16), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("recorded_at", sa.String(20), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
)
