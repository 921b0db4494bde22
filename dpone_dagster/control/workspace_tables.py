"""Control-store tables of workspaces: the fork tree, per-lake settings, admins, tombstones.

`workspace.parent_id` has no foreign key on purpose: deleting a parent sets its throwaway forks'
`parent_id` to NULL in the service (they stay isolated as orphaned forks), and SQLite would not
enforce `ON DELETE SET NULL` without a per-connection pragma. `workspace_lake` holds each fork's
settings cloned at creation, with `shared` as the fork-behaviour stamp. A `workspace_tombstone`
remembers a deleted workspace's parent so dropping that parent can still clean the deleted child's
leftover ledger rows. What a reader could get wrong: the root workspace `prod` takes its lake
settings from the configuration, never from `workspace_lake`.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

WORKSPACE_ID = sa.String(200)

workspace = sa.Table(
    "workspace",
    METADATA,
    sa.Column("id", WORKSPACE_ID, primary_key=True),
    sa.Column("parent_id", WORKSPACE_ID, nullable=True, index=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("created_at", sa.String(32), nullable=False),
)

workspace_lake = sa.Table(
    "workspace_lake",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("shared", sa.Boolean, nullable=False, default=False),
)

workspace_admin = sa.Table(
    "workspace_admin",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("actor", sa.String(200), primary_key=True),
)

workspace_tombstone = sa.Table(
    "workspace_tombstone",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("parent_id", WORKSPACE_ID, nullable=True, index=True),
    sa.Column("deleted_at", sa.String(32), nullable=False),
)
