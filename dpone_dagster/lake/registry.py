"""The cleanup ledger `fork_ducklake_namespace`: every physical location a fork ever attached.

Fork resolution registers the location it is about to attach (catalog identity, storage identity,
storage_ref, data path) before the job runs; cleanup reads the registered identities, never the
fork's current settings. Registration sits behind an in-process cache keyed per (store, workspace)
with a TTL, invalidated whenever that workspace's rows are cleaned: a fork recreated under the same
id within the TTL must register again, or its namespace would be orphaned at its own deletion.

What a reader could get wrong: registering an already-registered location resets
`schema_dropped`, because attaching recreates the schema.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dpone_dagster.config import StorageConfig
from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
from dpone_dagster.lake.attach import CatalogLocation
from dpone_dagster.lake.ports import Clock, utc_now

REGISTRATION_TTL = timedelta(seconds=60)


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

    @property
    def catalog_json(self) -> str:
        return canonical(
            {"kind": self.catalog.kind, "target": self.catalog.target, "password_env": self.catalog.password_env}
        )

    @property
    def storage_json(self) -> str:
        return canonical(self.storage.model_dump(mode="json") if self.storage else None)

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
            schema_dropped=bool(row.schema_dropped),
        )


class RegistrationCache:
    """Which locations this process registered recently, per (store URL, workspace)."""

    def __init__(self, ttl: timedelta = REGISTRATION_TTL) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], dict[str, object]] = {}

    def fresh(self, store: str, record: NamespaceRecord, now) -> bool:
        with self._lock:
            expiry = self._seen.get((store, record.workspace_id), {}).get(record.location_key)
            return expiry is not None and expiry > now

    def remember(self, store: str, record: NamespaceRecord, now) -> None:
        with self._lock:
            self._seen.setdefault((store, record.workspace_id), {})[record.location_key] = now + self.ttl

    def invalidate(self, store: str, workspace_id: str) -> None:
        with self._lock:
            self._seen.pop((store, workspace_id), None)


CACHE = RegistrationCache()


def _key(record: NamespaceRecord):
    return sa.and_(
        ledger.c.workspace_id == record.workspace_id,
        ledger.c.ducklake_name == record.ducklake_name,
        ledger.c.location_key == record.location_key,
    )


def register(
    engine: Engine, record: NamespaceRecord, *, clock: Clock = utc_now, cache: RegistrationCache = CACHE
) -> bool:
    """Upsert the row unless registered within the TTL. Returns True when the store was written."""
    store = str(engine.url)
    now = clock()
    if cache.fresh(store, record, now):
        return False
    with engine.begin() as conn:
        updated = conn.execute(
            ledger.update().where(_key(record)).values(schema_dropped=False)
        ).rowcount
        if not updated:
            conn.execute(
                ledger.insert().values(
                    workspace_id=record.workspace_id,
                    ducklake_name=record.ducklake_name,
                    location_key=record.location_key,
                    catalog=record.catalog_json,
                    storage=record.storage_json,
                    storage_ref=record.storage_ref,
                    data_path=record.data_path,
                    metadata_schema=record.metadata_schema,
                    schema_dropped=False,
                )
            )
    cache.remember(store, record, now)
    return True


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
