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

What a reader could get wrong: the registered identities may point somewhere the fork's current
settings no longer do — that is the point (settings drift must not orphan what the fork wrote).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from dpone_dagster.config import DponeConfig, StorageConfig, load_config, resolve_secret
from dpone_dagster.contracts.workspace_ids import check_workspace_id
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import deleted_children, lake_settings
from dpone_dagster.errors import ConfigError, DponeError, LakeError
from dpone_dagster.lake.catalogs import CatalogAdapters
from dpone_dagster.lake.naming import FORK_DATA_DIR, is_fork_schema, is_fork_segment_of
from dpone_dagster.lake.object_store import StorageAdapters
from dpone_dagster.lake.ports import Namespace
from dpone_dagster.lake.roles import drop_roles
from dpone_dagster.lake.registry import (
    CACHE,
    NamespaceRecord,
    RegistrationCache,
    delete_record,
    mark_schema_dropped,
    records,
)

log = logging.getLogger(__name__)


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
        return Namespace(record.catalog.sibling(record.metadata_schema), None)
    return Namespace(record.catalog, record.metadata_schema)


def _credentials_present(storage: StorageConfig | None) -> bool:
    names = [n for n in (storage.key_id_env, storage.secret_env) if n] if storage else []
    try:
        for name in names:
            resolve_secret(name)
    except ConfigError:
        return False
    return True


def _donor_storage(
    record: NamespaceRecord, donor: str | None, config: DponeConfig
) -> StorageConfig | None:
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
        report.objects_deleted += store.delete_prefix(prefix, storage)
        if store.list_prefix(prefix, storage):
            raise PrefixNotEmptyError("objects appeared under the fork's prefix while it was swept")
        delete_record(engine, record)
        report.cleaned.append((record.workspace_id, record.ducklake_name, record.metadata_schema))
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
        rows = records(conn, owners)
    report = CleanupReport()
    for record in rows:
        _clean_one(record, ports, engine, report, credential_donor, config)
    blocked = {row.workspace_id for row in report.schemas_pending}
    for left in drop_roles([o for o in owners if o not in blocked], config):
        report.leftovers.append(LeftoverRow(left.workspace_id, left.lake, left.role, "roles", left.code, False))
    for owner in owners:
        ports.registrations.invalidate(str(engine.url), owner)
    return report
