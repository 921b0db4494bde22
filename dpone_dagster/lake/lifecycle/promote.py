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
3. reads again every snapshot id the reviewed diff names (the fork's table, and with `--since-pin`
   the owner's range): a different one (the fork changed since) is refused (`fork.diff_mismatch`).
   The diff is not recomputed: a DuckLake snapshot never changes, so the same ids are the same
   diff, and recomputing would read both tables whole (a cost that grows with the table);
4. publishes every named table inside ONE DuckLake transaction on the parent's attach, all tables
   or none, each either by MOVING the fork's data files into the parent's data path and
   registering them (`ducklake_add_data_files`, see `promote_files.py`: a rename on a local disk,
   a server-side copy on S3, costs nothing per byte) or, where a move cannot carry exactly the
   table's rows (`TablePlan.copy_reason`), by `CREATE OR REPLACE TABLE … AS SELECT`. Either way
   the parent's files are its own: listed in its catalog, under its data path, outside the fork's
   prefix, so dropping the fork cannot touch them and the parent's maintenance manages them;
5. records each table as materialized by the parent (`tracking.record_materialization`) and its
   provenance (fork, fork incarnation, fork snapshot, diff id, parent snapshot) in `fork_promotion`,
   with the moved files' journal rows settled (`fork_promotion_file`) in the same transaction.

What a reader could get wrong: steps 4 and 5 are two stores. A crash between the DuckLake commit
and the control-store write leaves the promoted tables in the parent but untracked (forks see
them as absent, not deferred) until the parent's next managed materialize; promoting again is
refused as a conflict, because the parent's table changed. Moved files are journaled before they
are touched, so a crash before the commit loses nothing (`promote_files.recover_promotions` puts
them back). The diff id is trusted as far as its snapshot ids: a fork process that rewrote its own
files outside DuckLake after the review is not detected. On PostgreSQL the fork's namespace is
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
from dpone_dagster.lake.guard.statement import quote_ident, sql_string
from dpone_dagster.lake.lifecycle.diff import ForkDiff, nearest_owner, recorded_diff
from dpone_dagster.lake.lifecycle.diff_sql import TableVersions, columns_of
from dpone_dagster.lake.lifecycle.promote_files import (
    FileMover,
    PromotionMoveError,
    TablePlan,
    committed_promotions,
    mark_adopted,
    metadata_prefix,
    plan_table,
    recover_promotions,
    registration_paths,
    storage_reason,
)
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.ancestors import ancestor_reads
from dpone_dagster.lake.resolution.fork import ancestor_options, physical_lake, secret_and_attach
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

MOVED, COPIED = "moved", "copied"


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


def _nothing(*_args) -> None:
    return None


@dataclass
class PromotePorts:
    """Test seams. `after_copy` runs inside the transaction after each table is published;
    `after_transfer` after the files moved, before the transaction; `after_commit` after the
    DuckLake commit, before the control store is written; `copy_only` turns the move off."""

    after_copy: Callable[[TableName], None] = field(default=_nothing)
    after_transfer: Callable[[], None] = field(default=_nothing)
    after_commit: Callable[[], None] = field(default=_nothing)
    copy_only: bool = False
    clock: Clock = utc_now


@dataclass(frozen=True)
class PromotedTable:
    table: str
    fork_snapshot: int | None
    rows: int
    method: str = COPIED  # moved: its files became the parent's; copied: its rows were rewritten
    copy_reason: str | None = None


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


def _reviewed(
    config: DponeConfig, diff_id: str, view: WorkspaceLakeView, lake: str, names: Sequence[TableName]
) -> ForkDiff:
    diff = recorded_diff(config, diff_id)
    fork = view.chain_ids[0]
    if diff is None or diff.fork != fork or diff.document["lake"] != lake:
        raise DiffUnknownError(
            f"no diff {diff_id!r} of fork {fork!r} (lake {lake!r}); run `dpone fork diff {fork}` and review it"
        )
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
            out.append(
                (
                    f"{name}: the parent side is {owner}@{now}, the diff compared "
                    f"{entry['owner']}@{entry['parent_snapshot']}"
                )
            )
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


def _changed_since_review(
    conn, table_version: TableVersions, config, view, reviewed: ForkDiff, names, fork_alias, alias_of
) -> list[str]:
    """Every snapshot id the reviewed document names that is no longer current (empty: same diff)."""
    out = []
    for name in names:
        entry = reviewed.table(name)
        now = table_version(fork_alias, name)
        if now != entry["fork_snapshot"]:
            out.append(f"{name} is at fork snapshot {now}, the diff saw {entry['fork_snapshot']}")
        since = entry.get("parent_changes")
        alias = alias_of(entry["owner"]) if entry["owner"] else None
        if since is not None and alias is not None:
            start = built_from(config, view.chain_ids[0], reviewed.document["lake"], name).get(
                entry["owner"], view.pins.get(entry["owner"])
            )
            end = int(conn.execute(f"SELECT max(snapshot_id) FROM {quote_ident(alias)}.snapshots()").fetchone()[0])
            if (start, end) != (since["since"], since["to"]):
                out.append(
                    (
                        f"{name}: the parent's changes are now {start}..{end}, the diff counted "
                        f"{since['since']}..{since['to']}"
                    )
                )
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
    fork_lake = physical_lake(
        fork_id, view.settings[fork_id].settings, config, is_fork=True, incarnation=view.incarnation
    )
    members = ancestor_reads(acting, lake, config).members if parent.fork_mode else {}
    attached = {a.alias for a in parent.ancestors}
    aliases = {m: a for m, a in members.items() if a in attached} | {acting: parent.alias}
    parent_storage = view.settings[acting].settings.storage
    conn = parent.connect()
    try:
        for statement in secret_and_attach(fork_lake, fork_alias, ancestor_options(fork_lake)):
            conn.execute(statement.render(redact=False))
        recover_promotions(config, acting, lake, committed_promotions(conn, parent.alias), clock=ports.clock)
        versions = TableVersions(conn)  # one read of each lake's snapshot log, before anything is written
        conflicts = _conflicts(versions, config, view, reviewed, names, aliases.get)
        if conflicts:
            raise PromotionConflictError(
                f"the parent changed since diff {diff_id}: " + "; ".join(conflicts) + ". Rebuild or diff again."
            )
        changed = _changed_since_review(conn, versions, config, view, reviewed, names, fork_alias, aliases.get)
        if changed:
            raise DiffMismatchError(
                f"the fork changed since the reviewed diff {diff_id}: "
                + "; ".join(changed)
                + ". Diff again and review."
            )
        reason = (
            "copy requested"
            if ports.copy_only
            else storage_reason(fork_lake.data_path, parent.data_path, fork_lake.settings.storage, parent_storage)
        )
        meta = metadata_prefix(fork_alias, fork_lake.namespace.schema)
        plans = [plan_table(conn, fork_alias, meta, name, reason) for name in names]
        mover = FileMover(
            config, acting, lake, fork_id, parent.data_path, fork_lake.data_path, parent_storage, ports.clock
        )
        plans = _publish(conn, parent.alias, fork_alias, plans, mover, ports)
        snapshot = int(
            conn.execute(f"SELECT max(snapshot_id) FROM {quote_ident(parent.alias)}.snapshots()").fetchone()[0]
        )
        columns = {name: columns_of(conn, parent.alias, name) for name in names}
    finally:
        conn.close()
    promoted = tuple(
        PromotedTable(
            str(p.name), reviewed.table(p.name)["fork_snapshot"], p.rows, MOVED if p.moves else COPIED, p.copy_reason
        )
        for p in plans
    )
    _record(
        config,
        acting,
        lake,
        fork_id,
        view.incarnation,
        diff_id,
        snapshot,
        promoted,
        columns,
        ports.clock,
        mover.promotion_id,
    )
    return PromotionResult(fork_id, acting, lake, diff_id, snapshot, promoted)


class _RegistrationRefused(Exception):
    """DuckLake refused to register a moved file (e.g. a type it cannot map); never leaves `_publish`."""


def _publish(
    conn, parent_alias: str, fork_alias: str, plans: list[TablePlan], mover: FileMover, ports: PromotePorts
) -> list[TablePlan]:
    """Move what can move, then one transaction; a move or registration refused falls back to
    copying every table. Returns the plans as published (with their row counts)."""
    try:
        targets = mover.move([p for p in plans if p.moves])
    except PromotionMoveError as refused:
        mover.undo()
        plans, targets = [p.copied(refused.message) for p in plans], {}
    try:
        ports.after_transfer()
        published = _transaction(conn, parent_alias, fork_alias, plans, targets, mover, ports)
    except _RegistrationRefused as refused:
        mover.undo()
        plans = [p.copied(f"DuckLake refused to register the moved files ({refused})") for p in plans]
        published = _transaction(conn, parent_alias, fork_alias, plans, {}, mover, ports)
    except BaseException:
        mover.undo()  # rolled back: nothing refers to the moved files, they go back to the fork
        raise
    ports.after_commit()
    return published


def _transaction(conn, parent_alias, fork_alias, plans, targets, mover: FileMover, ports) -> list[TablePlan]:
    """Every table in one DuckLake transaction; a failure rolls all of them back."""
    import duckdb

    views = {
        (schema, view)
        for schema, view in conn.execute(
            "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ?", [parent_alias]
        ).fetchall()
    }
    out = []
    conn.execute("BEGIN TRANSACTION")
    try:
        for plan in plans:
            name = plan.name
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(parent_alias)}.{quote_ident(name.schema)}")
            if (name.schema, name.table) in views:  # the parent is itself a fork deferring this table
                conn.execute(f"DROP VIEW {name.qualified(parent_alias)}")
            source = f"SELECT * FROM {name.qualified(fork_alias)}"
            if name in targets:
                conn.execute(f"CREATE OR REPLACE TABLE {name.qualified(parent_alias)} AS {source} LIMIT 0")
                try:
                    conn.execute(
                        "CALL ducklake_add_data_files(?, ?, ?, schema => ?, hive_partitioning => false)",
                        [parent_alias, name.table, registration_paths(targets[name], mover.promotion_id), name.schema],
                    )
                except duckdb.Error as exc:
                    raise _RegistrationRefused(type(exc).__name__) from None
                out.append(plan)
            else:
                (count,) = conn.execute(
                    f"CREATE OR REPLACE TABLE {name.qualified(parent_alias)} AS {source}"
                ).fetchone()
                out.append(TablePlan(name, rows=int(count), copy_reason=plan.copy_reason))
            ports.after_copy(name)
        conn.execute(
            f"CALL ducklake_set_commit_message({sql_string(parent_alias)}, 'dpone', 'fork promotion', "
            f"extra_info => {sql_string(mover.commit_info)})"
        )
        conn.execute("COMMIT")
    except BaseException:
        try:
            conn.execute("ROLLBACK")
        except duckdb.Error:
            pass  # a failed COMMIT has rolled back already; the original error is the one to raise
        raise
    return out


def _record(config, parent, lake, fork, incarnation, diff_id, snapshot, promoted, columns, clock, promotion_id) -> None:
    now = clock().isoformat()
    for table in promoted:
        name = TableName.parse(table.table)
        record_materialization(
            parent,
            lake,
            name.schema,
            name.table,
            status="materialized",
            snapshot_id=snapshot,
            columns=columns[name],
            config=config,
            clock=clock,
        )
    with open_store(config.control_store).begin() as conn:
        mark_adopted(conn, promotion_id)
        for table in promoted:
            name = TableName.parse(table.table)
            conn.execute(
                fork_promotion.insert().values(
                    workspace_id=parent,
                    lake=lake,
                    schema_name=name.schema,
                    table_name=name.table,
                    diff_id=diff_id,
                    fork_id=fork,
                    fork_incarnation=incarnation,
                    fork_snapshot_id=table.fork_snapshot,
                    snapshot_id=snapshot,
                    promoted_at=now,
                )
            )


def promotions(config: DponeConfig, workspace_id: str, lake: str = "main") -> list[dict]:
    """The provenance rows of every table promoted into `workspace_id`'s `lake`, oldest first."""
    p = fork_promotion
    query = sa.select(p).where(p.c.workspace_id == workspace_id, p.c.lake == lake).order_by(p.c.promoted_at)
    with open_store(config.control_store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]
