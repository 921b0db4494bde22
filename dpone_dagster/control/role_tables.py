"""Control-store table of the PostgreSQL roles dpone provisions for fork catalogs (and their ledger).

- `lake_catalog_role`: one row per role dpone created in a lake's PostgreSQL catalog cluster: a
  fork's writer (owns the fork's metadata schema), a fork's reader (reads the ancestors' metadata
  schemas and its own), or a NOLOGIN read group of one metadata schema. Rows of a fork are deleted
  only after the role is gone from PostgreSQL, so a retried `dpone fork drop` still finds it.
  Rows are written *before* the roles are created; `ready` is set once provisioning finished.

What a reader could get wrong: `password` holds the generated password of a LOGIN role *sealed*
(`fernet1:…`, see `control/role_passwords.py`) under a key kept outside the store; the fork's process
unseals it to present it to PostgreSQL. Reading this table alone yields no password; a process
with both the table and the key can connect as any fork's roles (never as a lake owner: owner
credentials are environment-variable references only). See docs/forks.md.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

lake_catalog_role = sa.Table(
    "lake_catalog_role",
    METADATA,
    sa.Column("role_name", sa.String(63), primary_key=True),
    sa.Column("catalog", sa.Text, nullable=False),
    sa.Column("workspace_id", sa.String(200), nullable=False, index=True),
    sa.Column("lake", sa.String(63), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("metadata_schema", sa.String(63), nullable=False),
    sa.Column("admin", sa.Text, nullable=False),
    sa.Column("password", sa.Text, nullable=True),
    sa.Column("ready", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.String(32), nullable=False),
)
