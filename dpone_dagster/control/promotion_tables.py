"""Control-store tables of fork diffs and promotions.

- `fork_diff`: every diff a fork computed (`dpone fork diff`, the "diff against parent" check),
  keyed by its `diff_id` (the SHA-256 of the canonical JSON `document`). Promotion looks the
  reviewed id up here to learn which parent snapshots the user saw, then recomputes the diff.
- `fork_promotion`: one row per table a promotion published into a parent: the fork (id and
  incarnation), the fork table's snapshot that was copied, the diff id the user reviewed, and the
  parent snapshot the copy committed as.

What a reader could get wrong: a `fork_diff` row is a record of what was shown, not an
authorisation; promotion never trusts its document beyond the snapshot ids it names, and refuses
unless a fresh diff has exactly the same id.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

WORKSPACE_ID = sa.String(200)

fork_diff = sa.Table(
    "fork_diff",
    METADATA,
    sa.Column("diff_id", sa.String(80), primary_key=True),
    sa.Column("workspace_id", WORKSPACE_ID, nullable=False, index=True),
    sa.Column("lake", sa.String(63), nullable=False),
    sa.Column("document", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(32), nullable=False),
)

fork_promotion = sa.Table(
    "fork_promotion",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),  # the parent promoted into
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("schema_name", sa.String(255), primary_key=True),
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("diff_id", sa.String(80), primary_key=True),
    sa.Column("fork_id", WORKSPACE_ID, nullable=False),
    sa.Column("fork_incarnation", sa.String(64), nullable=False),
    sa.Column("fork_snapshot_id", sa.BigInteger, nullable=True),
    sa.Column("snapshot_id", sa.BigInteger, nullable=True),
    sa.Column("promoted_at", sa.String(32), nullable=False),
)
