"""`dpone fork promote`: publish a fork's tables into its parent, as the parent, in one transaction.

Promotion runs in the PARENT's process (the configured workspace must be the fork's parent; a
fork's own process is refused, `fork.promotion_not_parent`). It attaches the parent writable (its
normal resolution) and the fork READ_ONLY, and then, in order:

1. looks up the diff the user reviewed (`--diff-id`, recorded by `dpone fork diff`); unknown, of
   another fork or incarnation, or not covering every named table: refused;
2. optimistic concurrency by snapshot id: each named table's owner in the parent must still be at
   the snapshot the diff compared against, and every upstream the fork built the table from
   (`pins.built_from`: per ancestor, the snapshot read) must not have changed since for any table
   the fork defers to that ancestor; else `fork.promotion_conflict`, nothing written;
3. recomputes the diff in this session; a different id (the fork changed since) is refused
   (`fork.diff_mismatch`);
4. copies every named table with `CREATE OR REPLACE TABLE … AS SELECT` inside ONE DuckLake
   transaction on the parent's attach: all tables or none become visible, and the data is
   rewritten into the parent's own data path, so no file is shared with the fork and dropping the
   fork later cannot touch it;
5. records each table as materialized by the parent (`tracking.record_materialization`) and its
   provenance (fork, fork incarnation, fork snapshot, diff id, parent snapshot) in `fork_promotion`.

What a reader could get wrong: steps 4 and 5 are two stores. A crash between the DuckLake commit
and the control-store write leaves the promoted tables in the parent but untracked (forks see
them as absent, not deferred) until the parent's next managed materialize; promoting again is
refused as a conflict, because the parent's table changed. On PostgreSQL the fork's namespace is
read with the parent's own catalog credential, which must be able to read the fork's schema.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.control.promotion_tables import fork_promotion
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import LakeError, WorkspaceError
from dpone_dagster.lake.guard.statement import quote_ident
from dpone_dagster.lake.lifecycle.diff import ForkDiff, diff_document, nearest_owner, recorded_diff
from dpone_dagster.lake.lifecycle.diff_sql import TableVersions, columns_of
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.fork import ancestor_options, ancestor_reads, physical_lake, secret_and_attach
from dpone_dagster.lake.resolution.naming import ancestor_alias
from dpone_dagster.lake.resolution.pins import built_from
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.tracking import (
    WorkspaceLakeView,
    nearest_owners,
    record_materialization,
    workspace_lake_view,
)


class PromotionNotFromParentError(WorkspaceError):
    code = "fork.promotion_not_parent"


class DiffUnknownError(LakeError):
    code = "fork.diff_unknown"


class PromotionNotInDiffError(LakeError):
    code = "fork.promotion_not_in_diff"


class DiffMismatchError(LakeError):
    code = "fork.diff_mismatch"


class PromotionConflictError(LakeError):
    code = "fork.promotion_conflict"


@dataclass
class PromotePorts:
    """`after_copy` runs inside the transaction after each table's copy (tests inject failures)."""

    after_copy: Callable[[TableName], None] = field(default=lambda _name: None)
    clock: Clock = utc_now


@dataclass(frozen=True)
class PromotedTable:
    table: str
    fork_snapshot: int | None
    rows: int


@dataclass(frozen=True)
class PromotionResult:
    fork: str
    parent: str
    lake: str
    diff_id: str
    snapshot_id: int
    tables: tuple[PromotedTable, ...]

    def as_dict(self) -> dict:
        return {
            "fork": self.fork,
            "parent": self.parent,
            "lake": self.lake,
            "diff_id": self.diff_id,
            "snapshot_id": self.snapshot_id,
            "tables": [t.__dict__ for t in self.tables],
        }


def _reviewed(config: DponeConfig, diff_id: str, view: WorkspaceLakeView, lake: str, names: Sequence[TableName]) -> ForkDiff:
    diff = recorded_diff(config, diff_id)
    fork = view.chain_ids[0]
    if diff is None or diff.fork != fork or diff.document["lake"] != lake:
        raise DiffUnknownError(f"no diff {diff_id!r} of fork {fork!r} (lake {lake!r}); run `dpone fork diff {fork}` and review it")
    if diff.document["incarnation"] != view.incarnation:
        raise DiffUnknownError(f"diff {diff_id!r} is of an earlier incarnation of {fork!r}; diff again")
    covered = {e["table"] for e in diff.tables}
    missing = sorted(str(n) for n in names if str(n) not in covered)
    if missing:
        raise PromotionNotInDiffError(f"diff {diff_id!r} does not cover {', '.join(missing)}; diff those tables too")
    return diff


def _conflicts(table_version: TableVersions, config, view, reviewed: ForkDiff, names, alias_of) -> list[str]:
    """Every reason the parent side moved since the diff (empty: promote)."""
    fork, lake = view.chain_ids[0], reviewed.document["lake"]
    out = []
    for name in names:
        entry = reviewed.table(name)
        owner = nearest_owner(view, name)
        now = table_version(alias_of(owner), name) if owner is not None and alias_of(owner) else None
        if owner != entry["owner"] or now != entry["parent_snapshot"]:
            out.append(f"{name}: the parent side is {owner}@{now}, the diff compared {entry['owner']}@{entry['parent_snapshot']}")
    deferred = nearest_owners(view.chain_ids, view.tracking)
    for name in names:
        for owner, read in sorted(built_from(config, fork, lake, name).items()):
            alias = alias_of(owner)
            upstream = sorted(t for t, (i, _) in deferred.items() if view.chain_ids[i] == owner)
            if alias is None:
                out.append(f"{name}: built from {owner}@{read}, which is not attached here")
                continue
            for table in upstream:
                version = table_version(alias, table)
                if version is not None and version > read:
                    out.append(f"{name}: built from {owner}@{read}; upstream {table} changed at snapshot {version}")
    return out


def promote(
    fork_id: str,
    tables: Sequence[str],
    diff_id: str,
    *,
    lake: str = "main",
    config: DponeConfig | None = None,
    ports: PromotePorts | None = None,
) -> PromotionResult:
    """Publish `tables` of `fork_id` into its parent, which must be this process's workspace."""
    config = config or load_config()
    ports = ports or PromotePorts()
    acting = config.workspace
    if not tables:
        raise LakeError("name at least one table to promote", code="fork.promotion_no_tables")
    view = workspace_lake_view(fork_id, lake, config)
    if len(view.chain) < 2 or view.chain_ids[1] != acting:
        raise PromotionNotFromParentError(
            f"this process acts for workspace {acting!r}; promotion of {fork_id!r} runs as its parent "
            f"({view.chain_ids[1] if len(view.chain) > 1 else 'none'!r}), never from the fork's own process"
        )
    if not view.fork_mode:
        raise LakeError(f"lake {lake!r} of {fork_id!r} is not an isolated fork lake", code="fork.not_isolated")
    names = sorted({TableName.parse(t) for t in tables})
    reviewed = _reviewed(config, diff_id, view, lake, names)

    parent = resolve(acting, lake, config=config)
    fork_alias = ancestor_alias(lake, fork_id)
    fork_lake = physical_lake(fork_id, view.settings[fork_id].settings, config, is_fork=True, incarnation=view.incarnation)
    members = ancestor_reads(acting, lake, config).members if parent.fork_mode else {}
    attached = {a.alias for a in parent.ancestors}
    aliases = {m: a for m, a in members.items() if a in attached} | {acting: parent.alias}
    conn = parent.connect()
    try:
        for statement in secret_and_attach(fork_lake, fork_alias, ancestor_options(fork_lake)):
            conn.execute(statement.render(redact=False))
        versions = TableVersions(conn)  # one read of each lake's snapshot log, before anything is written
        conflicts = _conflicts(versions, config, view, reviewed, names, aliases.get)
        if conflicts:
            raise PromotionConflictError(
                f"the parent changed since diff {diff_id}: " + "; ".join(conflicts) + ". Rebuild or diff again."
            )
        doc = reviewed.document
        keys = {TableName.parse(e["table"]): tuple(e["key"]) if e["key"] else None for e in doc["tables"]}
        fresh = ForkDiff(
            diff_document(
                conn, view, list(keys), keys, fork_alias=fork_alias, owner_alias=aliases.get,
                since_pin=doc["since_pin"], config=config, cap=doc["sample_cap"], versions=versions,
            )
        )
        if fresh.diff_id != diff_id:
            raise DiffMismatchError(
                f"the diff of {fork_id!r} is now {fresh.diff_id}, not the reviewed {diff_id}: the fork changed "
                "since; diff again and review"
            )
        copied = _copy(conn, parent.alias, fork_alias, names, ports)
        snapshot = int(conn.execute(f"SELECT max(snapshot_id) FROM {quote_ident(parent.alias)}.snapshots()").fetchone()[0])
        columns = {name: columns_of(conn, parent.alias, name) for name in names}
    finally:
        conn.close()
    promoted = tuple(
        PromotedTable(str(n), reviewed.table(n)["fork_snapshot"], copied[n]) for n in names
    )
    _record(config, acting, lake, fork_id, view.incarnation, diff_id, snapshot, promoted, columns, ports.clock)
    return PromotionResult(fork_id, acting, lake, diff_id, snapshot, promoted)


def _copy(conn, parent_alias: str, fork_alias: str, names: Sequence[TableName], ports: PromotePorts) -> dict[TableName, int]:
    """Every table in one transaction; a failure rolls all of them back."""
    rows: dict[TableName, int] = {}
    views = {
        (schema, view)
        for schema, view in conn.execute(
            "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ?", [parent_alias]
        ).fetchall()
    }
    conn.execute("BEGIN TRANSACTION")
    try:
        for name in names:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(parent_alias)}.{quote_ident(name.schema)}")
            if (name.schema, name.table) in views:  # the parent is itself a fork deferring this table
                conn.execute(f"DROP VIEW {name.qualified(parent_alias)}")
            (count,) = conn.execute(
                f"CREATE OR REPLACE TABLE {name.qualified(parent_alias)} AS SELECT * FROM {name.qualified(fork_alias)}"
            ).fetchone()
            rows[name] = int(count)
            ports.after_copy(name)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return rows


def _record(config, parent, lake, fork, incarnation, diff_id, snapshot, promoted, columns, clock) -> None:
    now = clock().isoformat()
    for table in promoted:
        name = TableName.parse(table.table)
        record_materialization(
            parent, lake, name.schema, name.table, status="materialized", snapshot_id=snapshot,
            columns=columns[name], config=config, clock=clock,
        )
    with open_store(config.control_store).begin() as conn:
        for table in promoted:
            name = TableName.parse(table.table)
            conn.execute(
                fork_promotion.insert().values(
                    workspace_id=parent, lake=lake, schema_name=name.schema, table_name=name.table,
                    diff_id=diff_id, fork_id=fork, fork_incarnation=incarnation,
                    fork_snapshot_id=table.fork_snapshot, snapshot_id=snapshot, promoted_at=now,
                )
            )


def promotions(config: DponeConfig, workspace_id: str, lake: str = "main") -> list[dict]:
    """The provenance rows of every table promoted into `workspace_id`'s `lake`, oldest first."""
    p = fork_promotion
    query = sa.select(p).where(p.c.workspace_id == workspace_id, p.c.lake == lake).order_by(p.c.promoted_at)
    with open_store(config.control_store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]
