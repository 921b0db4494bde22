"""Control-store table of standard-runtime refusals: one row per denied task launch.

`runtime_denials` is append-only evidence of fail-closed runtime admission: which release, which
task, which run (or rollout-gate evaluation) asked, the typed denial reason and the authority expiry
the decision saw. What a reader could get wrong: a row is written only for a denial; admitted
synthetic-family launches leave their evidence in the runtime access ledger instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

runtime_denials = sa.Table(
    "runtime_denials",
    METADATA,
    sa.Column("denial_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("release_id", sa.String(71), nullable=False, index=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("origin", sa.String(32), nullable=False),
    sa.Column("task_kind", sa.String(16), nullable=False),
    sa.Column("workload_id", sa.String(512), nullable=False),
    sa.Column("hook_id", sa.String(128), nullable=False),
    sa.Column("reason", sa.String(64), nullable=False),
    sa.Column("authority_expires_at", sa.String(32), nullable=False),
    sa.Column("recorded_at", sa.String(20), nullable=False),
)
