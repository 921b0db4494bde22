"""Control-store tables of DuckLake fork environments: tracking and the cleanup ledger.

- `materialized_partition`: the latest status of every managed materialization, one row per
  (workspace, lake, schema, table, partition); `partition_key` is `''` for unpartitioned tables.
  Defer decisions read it: only `materialized` rows make an ancestor the owner of a table.
- `materialized_asset_schema`: the column schema captured at the latest successful materialize
  (an `is_current` column marks an SCD2 table, whose forks also get a `<table>_current` view).
- `fork_ducklake_namespace`: the cleanup ledger, one row per physical location a fork ever
  attached. The key includes catalog, storage, storage_ref and data_path (as `location_key`, the
  SHA-256 of their canonical JSON, so long values never hit an index size limit), so settings
  drift adds rows instead of replacing them. No foreign key to `workspace`: a row outlives its workspace until
  both its schema and its data are gone.
- `fork_built_from`: per fork-materialized table, the snapshot of each ancestor it could read at
  its latest build (`lake/resolution/pins.py` `built_from`); staleness and promotion compare against it.
- `fork_prefix_tombstone`: a ledger row whose schema is gone and whose prefix was swept empty, but
  where a writer the drop could not prove gone (PostgreSQL catalogs) may still upload files: the row
  moves here (same columns, in the same transaction) with `swept_at`, and later cleanups sweep the
  prefix again until one after the grace period finds it empty. Its own table, so `create_all` adds
  it to an existing store.

What a reader could get wrong: `catalog` and `storage` are canonical JSON of credential-free
identities (environment-variable *names*, never values).
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

WORKSPACE_ID = sa.String(200)

materialized_partition = sa.Table(
    "materialized_partition",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("schema_name", sa.String(255), primary_key=True),
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("partition_key", sa.String(255), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("snapshot_id", sa.BigInteger, nullable=True),
    sa.Column("config", sa.Text, nullable=True),
    sa.Column("updated_at", sa.String(32), nullable=False),
)

materialized_asset_schema = sa.Table(
    "materialized_asset_schema",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("schema_name", sa.String(255), primary_key=True),
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("columns", sa.Text, nullable=False),
    sa.Column("snapshot_id", sa.BigInteger, nullable=True),
    sa.Column("updated_at", sa.String(32), nullable=False),
)

fork_built_from = sa.Table(
    "fork_built_from",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("schema_name", sa.String(255), primary_key=True),
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("owner_workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("snapshot_id", sa.BigInteger, nullable=False),
    sa.Column("built_at", sa.String(32), nullable=False),
)
"""Provenance of a fork-materialized table: per ancestor it could read when it was last built, the
snapshot of that ancestor it read (the pin, or the ancestor's snapshot at build time)."""


def _location_columns() -> list[sa.Column]:
    """The columns naming one registered fork location (fresh objects: a Column joins one table)."""
    return [
        sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
        sa.Column("ducklake_name", sa.String(63), primary_key=True),
        sa.Column("location_key", sa.String(64), primary_key=True),
        sa.Column("catalog", sa.Text, nullable=False),
        sa.Column("storage", sa.Text, nullable=False),
        sa.Column("storage_ref", sa.String(200), nullable=False),
        sa.Column("data_path", sa.Text, nullable=False),
        sa.Column("metadata_schema", sa.String(63), nullable=False),
    ]


fork_ducklake_namespace = sa.Table(
    "fork_ducklake_namespace",
    METADATA,
    *_location_columns(),
    sa.Column("schema_dropped", sa.Boolean, nullable=False, default=False),
)

fork_prefix_tombstone = sa.Table(
    "fork_prefix_tombstone",
    METADATA,
    *_location_columns(),
    sa.Column("swept_at", sa.String(32), nullable=False),
)
