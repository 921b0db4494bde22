"""Control-store tables of fork diffs and promotions.

- `fork_diff`: every diff a fork computed (`dpone fork diff`, the "diff against parent" check),
  keyed by its `diff_id` (the SHA-256 of the canonical JSON `document`). Promotion looks the
  reviewed id up here to learn which parent snapshots the user saw, then recomputes the diff.
- `fork_promotion`: one row per table a promotion published into a parent: the fork (id and
  incarnation), the fork table's snapshot that was published, the diff id the user reviewed, and
  the parent snapshot the promotion committed as.
- `fork_promotion_file`: one row per data file a promotion moved into the parent's ownership
  (`lake/lifecycle/promote_files.py`): where it was in the fork (`source`), where it is now in the
  parent's data path (`target`), how it got there (`rename` on a local disk, `s3_copy` server-side)
  and `state`: `pending` from before the file is touched until the promotion is settled, then
  `adopted` (the parent's DuckLake catalog lists it; kept as provenance). A `pending` row older than
  the recovery grace is a crashed promotion: recovery puts the file back or settles it.

What a reader could get wrong: a `fork_diff` row is a record of what was shown, not an
authorisation; promotion trusts its document only as far as the snapshot ids it names, each of
which it reads again (a DuckLake snapshot never changes, so the same ids mean the same diff). An
`adopted` row is history, not ownership: the parent's catalog alone decides when the file goes.
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

fork_promotion_file = sa.Table(
    "fork_promotion_file",
    METADATA,
    sa.Column("promotion_id", sa.String(64), primary_key=True),
    sa.Column("target", sa.String(2048), primary_key=True),
    sa.Column("workspace_id", WORKSPACE_ID, nullable=False, index=True),  # the parent promoted into
    sa.Column("lake", sa.String(63), nullable=False),
    sa.Column("fork_id", WORKSPACE_ID, nullable=False),
    sa.Column("schema_name", sa.String(255), nullable=False),
    sa.Column("table_name", sa.String(255), nullable=False),
    sa.Column("source", sa.String(2048), nullable=False),
    sa.Column("method", sa.String(16), nullable=False),  # rename | s3_copy
    sa.Column("state", sa.String(16), nullable=False),  # pending | adopted
    sa.Column("created_at", sa.String(32), nullable=False),
)
