"""The cleanup ledger `fork_ducklake_namespace`: every physical location a fork ever attached.

Fork resolution registers the location it is about to attach (catalog identity, storage identity,
storage_ref, data path) before the job runs; cleanup reads the registered identities, never the
fork's current settings. Registration is fenced: it writes the row in the same transaction as an
UPDATE of the fork's incarnation row that only matches while that incarnation is current and
`active`, so once a drop has moved it to `dropping` no process can register (and so attach) it
again, and a drop waiting on the row lock sees every row registered before it. Registration sits
behind an in-process cache keyed per (store, workspace, incarnation) with a TTL: a fork id
re-created by another process is a new incarnation, with new names, so it always registers anew.

A swept row of a PostgreSQL-catalog fork moves (in one transaction) to `fork_prefix_tombstone`,
which later cleanups re-sweep (see `lake/lifecycle/cleanup.py`); `storage_json` leaves StorageConfig fields
added after the ledger existed out while they are unset, so an upgrade does not re-key old rows.

What a reader could get wrong: registering an already-registered location resets
`schema_dropped`, because attaching recreates the schema; the cache only skips the *write* — every
resolution still reads the chain, which refuses a workspace that is being dropped.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dpone_dagster.config import StorageConfig
from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
from dpone_dagster.control.lake_tables import fork_prefix_tombstone as tombstone_table
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import is_current_incarnation, touch_active_incarnation
from dpone_dagster.errors import WorkspaceError
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.naming import is_own_folder
from dpone_dagster.lake.resolution.plan import IncarnationFence

REGISTRATION_TTL = timedelta(seconds=60)
# StorageConfig fields added after ledger rows existed: omitted from `storage_json` while None
LATER_STORAGE_FIELDS = frozenset({"read_only_key_id_env", "read_only_secret_env", "fork_key_id_env", "fork_secret_env"})


class ForkDroppingError(WorkspaceError):
    code = "workspace.dropping"


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class NamespaceRecord:
    """One ledger row: a fork's location of one lake, with credential-free identities."""

    workspace_id: str
    ducklake_name: str
    metadata_schema: str
    catalog: CatalogLocation
    storage: StorageConfig | None
    storage_ref: str
    data_path: str
    schema_dropped: bool = False
    swept_at: datetime | None = None  # set on a tombstone (see `to_tombstone`)

    @property
    def catalog_json(self) -> str:
        return canonical(
            {"kind": self.catalog.kind, "target": self.catalog.target, "password_env": self.catalog.password_env}
        )

    @property
    def storage_json(self) -> str:
        """Fields added after the ledger existed are left out while unset, so a location registered
        before them keeps its `location_key` (no duplicate row per location after an upgrade)."""
        if self.storage is None:
            return canonical(None)
        dumped = self.storage.model_dump(mode="json")
        return canonical({k: v for k, v in dumped.items() if not (k in LATER_STORAGE_FIELDS and v is None)})

    @property
    def location_key(self) -> str:
        parts = [self.catalog_json, self.storage_json, self.storage_ref, self.data_path]
        return hashlib.sha256(canonical(parts).encode()).hexdigest()

    @classmethod
    def from_row(cls, row) -> NamespaceRecord:
        catalog = json.loads(row.catalog)
        storage = json.loads(row.storage)
        return cls(
            workspace_id=row.workspace_id,
            ducklake_name=row.ducklake_name,
            metadata_schema=row.metadata_schema,
            catalog=CatalogLocation(catalog["kind"], catalog["target"], catalog["password_env"]),
            storage=StorageConfig.model_validate(storage) if storage is not None else None,
            storage_ref=row.storage_ref,
            data_path=row.data_path,
            schema_dropped=bool(getattr(row, "schema_dropped", True)),
            swept_at=datetime.fromisoformat(row.swept_at) if getattr(row, "swept_at", None) else None,
        )


class RegistrationCache:
    """Which locations this process registered recently, per (store URL, workspace, incarnation)."""

    def __init__(self, ttl: timedelta = REGISTRATION_TTL) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], dict[str, object]] = {}

    def fresh(self, store: str, record: NamespaceRecord, now, incarnation: str = "") -> bool:
        with self._lock:
            expiry = self._seen.get((store, record.workspace_id, incarnation), {}).get(record.location_key)
            return expiry is not None and expiry > now

    def remember(self, store: str, record: NamespaceRecord, now, incarnation: str = "") -> None:
        with self._lock:
            key = (store, record.workspace_id, incarnation)
            self._seen.setdefault(key, {})[record.location_key] = now + self.ttl

    def invalidate(self, store: str, workspace_id: str) -> None:
        with self._lock:
            for key in [k for k in self._seen if k[:2] == (store, workspace_id)]:
                self._seen.pop(key, None)


CACHE = RegistrationCache()


def _key_of(table, record: NamespaceRecord):
    """The row of `record`'s location in `table` (the ledger or the tombstone table)."""
    return sa.and_(
        table.c.workspace_id == record.workspace_id,
        table.c.ducklake_name == record.ducklake_name,
        table.c.location_key == record.location_key,
    )


def _key(record: NamespaceRecord):
    return _key_of(ledger, record)


def _location_values(record: NamespaceRecord) -> dict[str, object]:
    """The columns the ledger and the tombstone table share, for `record`'s location."""
    return {
        "workspace_id": record.workspace_id,
        "ducklake_name": record.ducklake_name,
        "location_key": record.location_key,
        "catalog": record.catalog_json,
        "storage": record.storage_json,
        "storage_ref": record.storage_ref,
        "data_path": record.data_path,
        "metadata_schema": record.metadata_schema,
    }


def register(
    engine: Engine,
    record: NamespaceRecord,
    *,
    incarnation: str = "",
    clock: Clock = utc_now,
    cache: RegistrationCache = CACHE,
    folder: CatalogLocation | None = None,
) -> bool:
    """Upsert the row unless registered within the TTL. Returns True when the store was written.
    `folder`: a fork's own DuckDB catalog file, whose folder is created once the place is registered.

    Refuses (`workspace.dropping`) when `incarnation` is no longer the fork's current, active one."""
    written = _register(engine, record, incarnation, clock, cache)
    if folder is not None:
        prepare_catalog_folder(folder)
    return written


def _register(
    engine: Engine, record: NamespaceRecord, incarnation: str, clock: Clock, cache: RegistrationCache
) -> bool:
    store = str(engine.url)
    now = clock()
    if cache.fresh(store, record, now, incarnation):
        return False
    with engine.begin() as conn:
        if not touch_active_incarnation(conn, record.workspace_id, incarnation, now.isoformat()):
            raise ForkDroppingError(
                f"workspace {record.workspace_id!r} is being dropped or was re-created; this "
                "resolution belongs to a dropped incarnation and attaches nothing"
            )
        updated = conn.execute(ledger.update().where(_key(record)).values(schema_dropped=False)).rowcount
        if not updated:
            conn.execute(ledger.insert().values(**_location_values(record), schema_dropped=False))
    cache.remember(store, record, now, incarnation)
    return True


def prepare_catalog_folder(catalog: CatalogLocation) -> None:
    """Create the folder of a fork's own DuckDB catalog file (DuckDB creates the file, not its folder);
    only after its place is registered, so the ledger covers the folder before it exists."""
    path = Path(catalog.target)
    if catalog.kind == "duckdb" and is_own_folder(path):
        path.parent.mkdir(parents=True, exist_ok=True)


def require_current(fence: IncarnationFence) -> None:
    """Refuse (`workspace.dropping`) a plan whose fork was dropped or re-created since it was made."""
    with open_store(fence.control_store).connect() as conn:
        current = is_current_incarnation(conn, fence.workspace_id, fence.incarnation)
    if not current:
        raise ForkDroppingError(
            f"workspace {fence.workspace_id!r} was dropped (or re-created) after this plan was made; resolve again"
        )


def records(conn: Connection, workspace_ids: Sequence[str]) -> list[NamespaceRecord]:
    query = (
        sa.select(ledger)
        .where(ledger.c.workspace_id.in_(list(workspace_ids)))
        .order_by(ledger.c.workspace_id, ledger.c.ducklake_name, ledger.c.location_key)
    )
    return [NamespaceRecord.from_row(r) for r in conn.execute(query)]


def mark_schema_dropped(engine: Engine, record: NamespaceRecord) -> None:
    with engine.begin() as conn:
        conn.execute(ledger.update().where(_key(record)).values(schema_dropped=True))


def delete_record(engine: Engine, record: NamespaceRecord) -> None:
    with engine.begin() as conn:
        conn.execute(ledger.delete().where(_key(record)))


def to_tombstone(engine: Engine, record: NamespaceRecord, swept_at: datetime) -> None:
    """Move a swept row to `fork_prefix_tombstone` (or refresh its `swept_at`), in one transaction,
    so the location is covered by one table or the other at every moment."""
    with engine.begin() as conn:
        updated = conn.execute(
            tombstone_table.update().where(_key_of(tombstone_table, record)).values(swept_at=swept_at.isoformat())
        ).rowcount
        if not updated:
            conn.execute(tombstone_table.insert().values(**_location_values(record), swept_at=swept_at.isoformat()))
        conn.execute(ledger.delete().where(_key(record)))


def tombstones(conn: Connection, workspace_ids: Sequence[str] | None = None) -> list[NamespaceRecord]:
    """Tombstones (of `workspace_ids`, or of every workspace), as records with `swept_at` set."""
    query = sa.select(tombstone_table).order_by(
        tombstone_table.c.workspace_id, tombstone_table.c.ducklake_name, tombstone_table.c.location_key
    )
    if workspace_ids is not None:
        query = query.where(tombstone_table.c.workspace_id.in_(list(workspace_ids)))
    return [NamespaceRecord.from_row(r) for r in conn.execute(query)]


def delete_tombstone(engine: Engine, record: NamespaceRecord) -> None:
    with engine.begin() as conn:
        conn.execute(tombstone_table.delete().where(_key_of(tombstone_table, record)))
