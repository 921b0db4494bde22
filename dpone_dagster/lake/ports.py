"""Ports of the fork services: catalog access, object storage, clock. Adapters live next door.

Fork resolution and cleanup talk to the outside world only through these protocols, so tests can
make a catalog or a storage unreachable without stopping a shared server, and count round trips.

What a reader could get wrong: a `Namespace` is a *physical* place where one DuckLake's metadata
lives. For PostgreSQL that is a schema in a catalog database (several namespaces share one
database, and `inspect` answers for all of them in one connection); for a DuckDB-file catalog it
is the catalog file itself (a fork's is a sibling file), and `schema` is only its label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from dpone_dagster.config import StorageConfig
from dpone_dagster.lake.resolution.attach import CatalogLocation

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Namespace:
    """One DuckLake metadata namespace: `catalog` (database or file) + `schema` (None = default)."""

    catalog: CatalogLocation
    schema: str | None

    @property
    def database_key(self) -> str:
        return self.catalog.identity


LiveViewTriples = frozenset[tuple[str, str, str]]
"""Live views of a namespace as (schema, view name, stored SQL) triples."""


@dataclass(frozen=True)
class CatalogFacts:
    """What one catalog database said: which namespaces are bootstrapped; live views of one.

    `live_views` is None when the adapter leaves them to the session that attaches the namespace
    (DuckDB-file catalogs, which one process can attach only once).
    """

    bootstrapped: frozenset[Namespace]
    live_views: LiveViewTriples | None = field(default=frozenset())


class CatalogPort(Protocol):
    def inspect(self, namespaces: Sequence[Namespace], views_of: Namespace | None) -> CatalogFacts:
        """One round trip to one catalog database (all `namespaces` share `database_key`).

        Raises `CatalogUnreachableError` when the database cannot be reached.
        """
        ...

    def live_views(self, namespace: Namespace) -> LiveViewTriples:
        """The live views of one namespace, read apart from any session (plan inspection only)."""
        ...

    def drop_namespace(self, namespace: Namespace) -> None:
        """Drop a fork namespace (guarded: only `wm_fork_` names). Absent is not an error."""
        ...


class ObjectStorePort(Protocol):
    def delete_prefix(self, prefix: str, storage: StorageConfig | None) -> int:
        """Delete every object under `prefix` (an `s3://` URL or a local folder ending in `/`)."""
        ...

    def list_prefix(self, prefix: str, storage: StorageConfig | None) -> list[str]: ...
