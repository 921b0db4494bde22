"""`drop_fork_namespaces`: remove every namespace and data prefix a fork ever registered.

Per ledger row, in two phases:
1. schema: drop the namespace with the *registered* catalog identity (PostgreSQL
   `DROP SCHEMA … CASCADE`; DuckDB file: delete the sibling catalog file), hard-guarded on the
   `wm_fork_` prefix; on success the row's `schema_dropped` is set, so retries skip this phase;
2. data: delete every object under the registered `<root>/__wm_forks/<segment>/` prefix with the
   registered storage identity, hard-guarded on that prefix, then list it again: a row whose prefix
   is not empty after the sweep (a writer still running) stays. When the registered credentials
   are gone, the same `storage_ref` of the credential donor (the workspace being forked) is used.
A row is deleted only after both phases succeed; anything else stays for the next attempt. A
DuckDB-file fork catalog still attached by a live connection is not dropped (`lake.catalog_busy`):
the row stays, so whatever that connection goes on writing stays covered until a later pass.

Late writers on PostgreSQL catalogs: before any schema is dropped the fork's writer and reader roles
are fenced (`role_retirement.fence_roles`: NOLOGIN, their sessions terminated), so a live connection's next
commit fails. DuckLake uploads data files *before* it commits, so files of a statement in flight can
still land under the swept prefix: a PostgreSQL row therefore becomes a tombstone (same transaction)
instead of vanishing, and every later cleanup — the next drop of any workspace, `drop_fork_job`,
`dpone fork sweep` — sweeps the prefix again; the tombstone goes once a sweep at least
`TOMBSTONE_GRACE` after the last one that found files finds the prefix empty.

What a reader could get wrong: the registered identities may point somewhere the fork's current
settings no longer do — that is the point (settings drift must not orphan what the fork wrote).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import timedelta

from dpone_dagster.config import DponeConfig, StorageConfig, load_config, resolve_secret
from dpone_dagster.contracts.workspace_ids import check_workspace_id
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import deleted_children, lake_settings
from dpone_dagster.errors import ConfigError, DponeError, LakeError
from dpone_dagster.lake.catalogs import CatalogAdapters
from dpone_dagster.lake.lifecycle.role_retirement import drop_roles, fence_roles
from dpone_dagster.lake.object_store import StorageAdapters
from dpone_dagster.lake.ports import Clock, Namespace, utc_now
from dpone_dagster.lake.resolution.fork_catalog import fork_catalog_location
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, is_fork_schema, is_fork_segment_of
from dpone_dagster.lake.state.registry import (
    CACHE,
    NamespaceRecord,
    RegistrationCache,
    delete_record,
    delete_tombstone,
    mark_schema_dropped,
    records,
    to_tombstone,
    tombstones,
)

log = logging.getLogger(__name__)

# how long a swept prefix of a PostgreSQL-catalog fork keeps being re-swept after the last sweep
# that found (or first removed) files: covers a statement already uploading when the drop fenced it
TOMBSTONE_GRACE = timedelta(hours=1)


class UnsafeLedgerRowError(LakeError):
    code = "lake.unsafe_ledger_row"


class PrefixNotEmptyError(LakeError):
    code = "lake.prefix_not_empty"


@dataclass(frozen=True)
class LeftoverRow:
    workspace_id: str
    lake: str
    metadata_schema: str
    phase: str
    code: str
    schema_dropped: bool


@dataclass
class CleanupReport:
    cleaned: list[tuple[str, str, str]] = field(default_factory=list)
    leftovers: list[LeftoverRow] = field(default_factory=list)
    objects_deleted: int = 0
    # (workspace, lake, namespace) of tombstones kept for a later re-sweep / retired by this pass
    tombstones: list[tuple[str, str, str]] = field(default_factory=list)
    retired: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.leftovers

    @property
    def schemas_pending(self) -> list[LeftoverRow]:
        return [row for row in self.leftovers if not row.schema_dropped]


@dataclass
class CleanupPorts:
    catalogs: CatalogAdapters = field(default_factory=CatalogAdapters)
    storage: StorageAdapters = field(default_factory=StorageAdapters)
    registrations: RegistrationCache = CACHE
    clock: Clock = utc_now
    tombstone_grace: timedelta = TOMBSTONE_GRACE


def registered_prefix(record: NamespaceRecord) -> str:
    """`<root>/__wm_forks/<segment>/` of a row (any incarnation's segment of its workspace), or
    refuse when the row's data path lacks it."""
    marker = f"/{FORK_DATA_DIR}/"
    head, found, rest = record.data_path.partition(marker)
    segment = rest.split("/", 1)[0]
    if not found or not head or not is_fork_segment_of(record.workspace_id, segment) or "/" not in rest:
        raise UnsafeLedgerRowError("a ledger row's data path is not under its fork's data prefix")
    return f"{head}{marker}{segment}/"


def registered_namespace(record: NamespaceRecord) -> Namespace:
    if not is_fork_schema(record.metadata_schema):
        raise UnsafeLedgerRowError("a ledger row names a namespace that is not a fork namespace")
    if record.catalog.kind == "duckdb":
        return Namespace(fork_catalog_location(record.catalog, record.metadata_schema), None)
    return Namespace(record.catalog, record.metadata_schema)


def _credentials_present(storage: StorageConfig | None) -> bool:
    names = [n for n in (storage.key_id_env, storage.secret_env) if n] if storage else []
    try:
        for name in names:
            resolve_secret(name)
    except ConfigError:
        return False
    return True


def _donor_storage(record: NamespaceRecord, donor: str | None, config: DponeConfig) -> StorageConfig | None:
    if donor is None:
        return record.storage
    with open_store(config.control_store).connect() as conn:
        lakes = lake_settings(conn, [donor], config)[donor]
    for settings in lakes.values():
        if settings.settings.storage_ref == record.storage_ref:
            return settings.settings.storage
    return record.storage


def _clean_one(
    record: NamespaceRecord,
    ports: CleanupPorts,
    engine,
    report: CleanupReport,
    donor: str | None,
    config: DponeConfig,
) -> None:
    phase = "schema"
    try:
        namespace = registered_namespace(record)
        prefix = registered_prefix(record)
        if not record.schema_dropped:
            ports.catalogs.for_kind(namespace.catalog.kind).drop_namespace(namespace)
            mark_schema_dropped(engine, record)
            record = replace(record, schema_dropped=True)
        phase = "data"
        storage = record.storage
        if prefix.startswith("s3://") and not _credentials_present(storage):
            storage = _donor_storage(record, donor, config)
        store = ports.storage.for_prefix(prefix)
        deleted = store.delete_prefix(prefix, storage)
        report.objects_deleted += deleted
        if store.list_prefix(prefix, storage):
            raise PrefixNotEmptyError("objects appeared under the fork's prefix while it was swept")
        _settle(record, deleted, ports, engine, report)
    except Exception as exc:
        code = exc.code if isinstance(exc, DponeError) else "lake.cleanup_failed"
        log.warning(
            "fork cleanup of %s/%s stopped in the %s phase: %s (%s)",
            record.workspace_id,
            record.ducklake_name,
            phase,
            code,
            type(exc).__name__,
        )
        report.leftovers.append(
            LeftoverRow(
                record.workspace_id,
                record.ducklake_name,
                record.metadata_schema,
                phase,
                code,
                record.schema_dropped,
            )
        )


def _settle(record: NamespaceRecord, deleted: int, ports: CleanupPorts, engine, report: CleanupReport) -> None:
    """A swept-empty location: delete its row, or keep/refresh/retire its tombstone."""
    key = (record.workspace_id, record.ducklake_name, record.metadata_schema)
    now = ports.clock()
    if record.swept_at is None and record.catalog.kind == "duckdb":
        delete_record(engine, record)  # the catalog drop proved no connection had it attached
    elif record.swept_at is None or deleted:
        to_tombstone(engine, record, now)  # first sweep, or a late writer was found: grace restarts
        report.tombstones.append(key)
    elif now - record.swept_at < ports.tombstone_grace:
        report.tombstones.append(key)
        return
    else:
        delete_tombstone(engine, record)
        report.retired.append(key)
        return
    if record.swept_at is None:
        report.cleaned.append(key)


def sweep_tombstones(
    *, config: DponeConfig | None = None, ports: CleanupPorts | None = None, exclude: tuple[str, ...] = ()
) -> CleanupReport:
    """Re-sweep the tombstones of every workspace (but `exclude`): a late writer's files go, and a
    tombstone whose grace has passed with an empty prefix is retired."""
    config = config or load_config()
    ports = ports or CleanupPorts()
    engine = open_store(config.control_store)
    with engine.connect() as conn:
        rows = [r for r in tombstones(conn) if r.workspace_id not in exclude]
    report = CleanupReport()
    for record in rows:
        _clean_one(record, ports, engine, report, None, config)
    return report


def drop_fork_namespaces(
    workspace_id: str,
    *,
    config: DponeConfig | None = None,
    include_deleted_children: bool = True,
    credential_donor: str | None = None,
    ports: CleanupPorts | None = None,
) -> CleanupReport:
    """Clean every ledger row of `workspace_id` (and of its already-deleted child forks)."""
    check_workspace_id(workspace_id)
    config = config or load_config()
    ports = ports or CleanupPorts()
    engine = open_store(config.control_store)
    with engine.connect() as conn:
        owners = [workspace_id]
        if include_deleted_children:
            owners += [c for c in deleted_children(conn, workspace_id) if c != workspace_id]
        rows = records(conn, owners) + tombstones(conn, owners)
    report = CleanupReport()
    for left in fence_roles(owners, config):
        report.leftovers.append(LeftoverRow(left.workspace_id, left.lake, left.role, "fence", left.code, False))
    for record in rows:
        _clean_one(record, ports, engine, report, credential_donor, config)
    blocked = {row.workspace_id for row in report.schemas_pending}
    for left in drop_roles([o for o in owners if o not in blocked], config):
        report.leftovers.append(LeftoverRow(left.workspace_id, left.lake, left.role, "roles", left.code, False))
    for owner in owners:
        ports.registrations.invalidate(str(engine.url), owner)
    return report
