"""The cleanup ledger: partial failures stay retryable and nothing is orphaned after the retry."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import psycopg
import pytest
import sqlalchemy as sa

from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.catalogs import (
    CatalogAdapters,
    CatalogUnreachableError,
    DuckDBFileCatalog,
    PostgresCatalog,
    UnsafeNamespaceError,
)
from dpone_dagster.lake.lifecycle.cleanup import CleanupPorts, registered_prefix
from dpone_dagster.lake.object_store import (
    LocalPrefixes,
    S3Prefixes,
    StorageAdapters,
    StorageUnreachableError,
    UnsafePrefixError,
)
from dpone_dagster.lake.ports import Namespace
from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.fork_catalog import fork_catalog_location
from dpone_dagster.lake.resolution.naming import fork_metadata_schema
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.registry import NamespaceRecord, RegistrationCache, register
from dpone_dagster.workspaces.service import Workspaces

from .lakes import (
    fingerprint,
    fork_places,
    fork_prefix,
    fork_schema,
    incarnation,
    materialize,
    run_sql,
    set_lake_settings,
)


class DownCatalog:
    def inspect(self, namespaces, views_of):
        raise CatalogUnreachableError("down")

    def live_views(self, namespace):
        raise CatalogUnreachableError("down")

    def drop_namespace(self, namespace):
        raise CatalogUnreachableError("down")


class DownStorage:
    def list_prefix(self, prefix, storage):
        raise StorageUnreachableError("down")

    def delete_prefix(self, prefix, storage):
        raise StorageUnreachableError("down")


CATALOG_DOWN = CleanupPorts(catalogs=CatalogAdapters(postgres=DownCatalog(), duckdb=DownCatalog()))
STORAGE_DOWN = CleanupPorts(storage=StorageAdapters(s3=DownStorage(), local=DownStorage()))


def ledger_rows(env, workspace_id):
    with open_store(env.config.control_store).connect() as conn:
        return conn.execute(sa.select(ledger).where(ledger.c.workspace_id == workspace_id)).all()


def namespace_exists(env, workspace_id) -> bool:
    schema = fork_schema(env, workspace_id)
    resolved = resolve("prod", config=env.config)
    if resolved.catalog.kind == "postgres":
        with psycopg.connect(resolved.catalog.target) as conn:
            found = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
            ).fetchall()
        return bool(found)
    return os.path.exists(fork_catalog_location(resolved.catalog, schema).target)


def fork_files(env, workspace_id):
    return env.list_files(fork_prefix(env, workspace_id))


def test_catalog_down_then_storage_down_then_both_up_leaves_nothing(lake_env):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(20)")
    Workspaces(lake_env.config).create_fork("wm-fork-a", "prod", owner="alice")
    materialize(lake_env, "wm-fork-a", "orders", "SELECT range AS id FROM range(40)")
    parent = fingerprint(lake_env)
    assert namespace_exists(lake_env, "wm-fork-a") and fork_files(lake_env, "wm-fork-a")

    first = Workspaces(lake_env.config, cleanup_ports=CATALOG_DOWN).drop("wm-fork-a", actor="alice")
    assert first.workspace_deleted
    assert [(r.phase, r.code) for r in first.cleanup.leftovers] == [("schema", "lake.catalog_unreachable")]
    assert namespace_exists(lake_env, "wm-fork-a") and fork_files(lake_env, "wm-fork-a")
    assert [bool(r.schema_dropped) for r in ledger_rows(lake_env, "wm-fork-a")] == [False]

    old_schema = fork_schema(lake_env, "wm-fork-a")
    Workspaces(lake_env.config, cleanup_ports=CATALOG_DOWN).create_fork("wm-fork-a", "prod", owner="alice")
    assert fork_schema(lake_env, "wm-fork-a") != old_schema  # a new incarnation, in a new place
    assert run_sql(lake_env, "wm-fork-a", [], fetch="SELECT count(*) FROM lake_main.orders") == [(20,)]
    assert len(ledger_rows(lake_env, "wm-fork-a")) == 2  # the old row still covers the old place

    second = Workspaces(lake_env.config, cleanup_ports=STORAGE_DOWN).drop("wm-fork-a", actor="alice")
    assert second.workspace_deleted
    assert [(r.phase, r.code) for r in second.cleanup.leftovers] == [("data", "lake.storage_unreachable")] * 2
    namespaces, files = fork_places(lake_env, "wm-fork-a")
    assert namespaces == [] and files
    assert [bool(r.schema_dropped) for r in ledger_rows(lake_env, "wm-fork-a")] == [True, True]

    third = Workspaces(lake_env.config).drop("wm-fork-a", actor="anyone")
    assert third.cleanup.complete and third.cleanup.objects_deleted > 0
    assert ledger_rows(lake_env, "wm-fork-a") == []
    assert not namespace_exists(lake_env, "wm-fork-a") and fork_files(lake_env, "wm-fork-a") == []
    assert fingerprint(lake_env) == parent
    listed = [(w.id, w.pending_cleanup, w.tombstones) for w in Workspaces(lake_env.config).list() if w.deleted]
    # PostgreSQL: the swept prefixes stay tombstones, re-swept by later cleanups (test_lifecycle.py)
    assert listed == ([("wm-fork-a", 0, 2)] if lake_env.kind == "pg_s3" else [])
    assert fork_places(lake_env, "wm-fork-a") == ([], [])


def test_registered_postgres_identity_at_a_closed_port_keeps_the_row(pg_s3_lake):
    env = pg_s3_lake
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    materialize(env, "wm-fork-a", "t", "SELECT 1 AS x")
    with open_store(env.config.control_store).begin() as conn:
        row = conn.execute(sa.select(ledger)).one()
        catalog = json.loads(row.catalog)
        catalog["target"] = catalog["target"].replace(f"port={env.lake.catalog.split('port=')[1].split()[0]}", "port=1")
        conn.execute(ledger.update().values(catalog=json.dumps(catalog, sort_keys=True)))
    result = Workspaces(env.config).drop("wm-fork-a", actor="alice")
    assert [r.code for r in result.cleanup.leftovers] == ["lake.catalog_unreachable"]
    assert "port=1" not in str(result) and "password" not in str(result)
    assert namespace_exists(env, "wm-fork-a")


def test_storage_credentials_fall_back_to_the_donor(pg_s3_lake, monkeypatch):
    env = pg_s3_lake
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    moved = env.lake.storage.model_copy(
        update={"key_id_env": "DPONE_TEST_FORK_KEY", "secret_env": "DPONE_TEST_FORK_SECRET"}
    )
    set_lake_settings(env, "wm-fork-a", env.lake.model_copy(update={"storage": moved}))
    monkeypatch.setenv("DPONE_TEST_FORK_KEY", "testing-key-id")
    monkeypatch.setenv("DPONE_TEST_FORK_SECRET", "testing-secret-key")
    materialize(env, "wm-fork-a", "t", "SELECT range AS x FROM range(30)")
    assert fork_files(env, "wm-fork-a")
    monkeypatch.delenv("DPONE_TEST_FORK_KEY")
    monkeypatch.delenv("DPONE_TEST_FORK_SECRET")
    result = Workspaces(env.config).drop("wm-fork-a", actor="alice")
    assert result.cleanup.complete and fork_files(env, "wm-fork-a") == []


def test_recreating_a_fork_cleans_data_leftovers_and_registers_again(embedded_lake):
    env = embedded_lake
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    materialize(env, "wm-fork-a", "t", "SELECT 1 AS x")
    dropped = Workspaces(env.config, cleanup_ports=STORAGE_DOWN).drop("wm-fork-a", actor="alice")
    assert [r.phase for r in dropped.cleanup.leftovers] == ["data"] and fork_files(env, "wm-fork-a")

    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="bob")
    assert fork_files(env, "wm-fork-a") == [] and ledger_rows(env, "wm-fork-a") == []
    resolve("wm-fork-a", config=env.config)
    assert len(ledger_rows(env, "wm-fork-a")) == 1
    with pytest.raises(duckdb.Error, match="t does not exist"):
        materialize(env, "wm-fork-a", "main.t2", "SELECT * FROM lake_main.t")


def test_dropping_a_fork_cleans_its_deleted_childrens_leftovers(embedded_lake):
    env = embedded_lake
    service = Workspaces(env.config)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    service.create_fork("wm-fork-a/b", "wm-fork-a", owner="alice")
    materialize(env, "wm-fork-a/b", "t", "SELECT 1 AS x")
    Workspaces(env.config, cleanup_ports=CATALOG_DOWN).drop("wm-fork-a/b", actor="alice")
    assert namespace_exists(env, "wm-fork-a/b")
    result = service.drop("wm-fork-a", actor="alice")
    assert result.cleanup.complete
    assert {c[0] for c in result.cleanup.cleaned} == {"wm-fork-a/b"}
    assert not namespace_exists(env, "wm-fork-a/b") and ledger_rows(env, "wm-fork-a/b") == []


def test_catalog_drift_adds_a_row_and_cleanup_covers_both(embedded_lake, tmp_path):
    env = embedded_lake
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    materialize(env, "wm-fork-a", "t", "SELECT 1 AS x")
    first_namespace = resolve("wm-fork-a", config=env.config).catalog.target
    drifted = env.lake.model_copy(update={"catalog": str(tmp_path / "moved" / "main.ducklake")})
    set_lake_settings(env, "wm-fork-a", drifted)
    second = resolve("wm-fork-a", config=env.config)
    assert second.catalog.target != first_namespace
    materialize(env, "wm-fork-a", "t2", "SELECT 2 AS x")
    assert len(ledger_rows(env, "wm-fork-a")) == 2
    result = Workspaces(env.config).drop("wm-fork-a", actor="alice")
    assert result.cleanup.complete and len(result.cleanup.cleaned) == 2
    assert not os.path.exists(first_namespace) and not os.path.exists(second.catalog.target)


def test_data_path_drift_fails_loudly_instead_of_misreading(embedded_lake, tmp_path):
    env = embedded_lake
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    materialize(env, "wm-fork-a", "t", "SELECT 1 AS x")
    drifted = env.lake.model_copy(update={"data_path": str(tmp_path / "elsewhere" / "main") + "/"})
    set_lake_settings(env, "wm-fork-a", drifted)
    with pytest.raises(LakeError) as caught:
        materialize(env, "wm-fork-a", "t", "SELECT 2 AS x")
    assert caught.value.code == "lake.data_path_drift"
    assert str(tmp_path) not in caught.value.message
    assert len(ledger_rows(env, "wm-fork-a")) == 2
    assert Workspaces(env.config).drop("wm-fork-a", actor="alice").cleanup.complete


def test_flipping_a_lake_to_shared_keeps_its_ledger_rows(embedded_lake):
    env = embedded_lake
    service = Workspaces(env.config)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    materialize(env, "wm-fork-a", "t", "SELECT 1 AS x")
    service.set_lake_shared("wm-fork-a", "main", True, actor="alice")
    assert not resolve("wm-fork-a", config=env.config).fork_mode
    assert len(ledger_rows(env, "wm-fork-a")) == 1
    result = service.drop("wm-fork-a", actor="alice")
    assert result.cleanup.complete and not namespace_exists(env, "wm-fork-a")


def test_registration_cache_skips_rewrites_until_invalidated(embedded_lake):
    env = embedded_lake
    engine = open_store(env.config.control_store)
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    inc = incarnation(env, "wm-fork-a")
    record = NamespaceRecord(
        "wm-fork-a",
        "main",
        fork_metadata_schema("wm-fork-a", "main", inc),
        CatalogLocation("duckdb", "/x/main.ducklake"),
        None,
        "default",
        "/x/__wm_forks/seg/main/",
    )
    cache = RegistrationCache(ttl=timedelta(seconds=60))
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    assert register(engine, record, incarnation=inc, clock=lambda: t0, cache=cache)
    assert not register(engine, record, incarnation=inc, clock=lambda: t0 + timedelta(seconds=30), cache=cache)
    assert register(engine, record, incarnation=inc, clock=lambda: t0 + timedelta(seconds=61), cache=cache)
    cache.invalidate(str(engine.url), "wm-fork-a")
    assert register(engine, record, incarnation=inc, clock=lambda: t0 + timedelta(seconds=62), cache=cache)
    assert len(ledger_rows(env, "wm-fork-a")) == 1


def test_guards_refuse_anything_outside_fork_namespaces_and_prefixes(tmp_path):
    parent = CatalogLocation("duckdb", str(tmp_path / "main.ducklake"))
    (tmp_path / "main.ducklake").write_text("parent catalog")
    with pytest.raises(UnsafeNamespaceError):
        DuckDBFileCatalog().drop_namespace(Namespace(parent, None))
    assert (tmp_path / "main.ducklake").exists()
    with pytest.raises(UnsafeNamespaceError):
        PostgresCatalog().drop_namespace(Namespace(CatalogLocation("postgres", "host=127.0.0.1 port=1"), "public"))
    for store in (LocalPrefixes(), S3Prefixes()):
        for prefix in (str(tmp_path) + "/", "s3://bucket/lakes/main/", "s3://bucket/__wm_forks/"):
            with pytest.raises(UnsafePrefixError):
                store.delete_prefix(prefix, None)
    record = NamespaceRecord(
        "wm-fork-a",
        "main",
        fork_metadata_schema("wm-fork-a", "main"),
        parent,
        None,
        "default",
        str(tmp_path) + "/lakes/main/",
    )
    with pytest.raises(LakeError):
        registered_prefix(record)


class WriterDuringSweep(LocalPrefixes):
    """Deletes the prefix, then a still-running writer puts one more file under it."""

    def delete_prefix(self, prefix, storage):
        count = super().delete_prefix(prefix, storage)
        late = Path(prefix) / "main" / "late.parquet"
        late.parent.mkdir(parents=True, exist_ok=True)
        late.write_bytes(b"late")
        return count


def test_a_row_whose_prefix_refills_during_the_sweep_stays(embedded_lake):
    env = embedded_lake
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="alice")
    materialize(env, "wm-fork-a", "t", "SELECT 1 AS x")
    ports = CleanupPorts(storage=StorageAdapters(local=WriterDuringSweep()))
    first = Workspaces(env.config, cleanup_ports=ports).drop("wm-fork-a", actor="alice")
    assert [(r.phase, r.code) for r in first.cleanup.leftovers] == [("data", "lake.prefix_not_empty")]
    assert len(ledger_rows(env, "wm-fork-a")) == 1 and fork_places(env, "wm-fork-a")[1]
    second = Workspaces(env.config).drop("wm-fork-a", actor="alice")
    assert second.cleanup.complete and fork_places(env, "wm-fork-a") == ([], [])
