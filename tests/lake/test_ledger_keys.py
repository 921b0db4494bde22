"""Ledger location keys stay stable across StorageConfig additions; catalog inspection presents
the location's own password (a fork role's stored one), not only an env var's."""

from __future__ import annotations

import psycopg

from dpone_dagster.config import StorageConfig
from dpone_dagster.lake.catalogs import PostgresCatalog
from dpone_dagster.lake.lifecycle.roles import RoleCatalogLocation, read_password
from dpone_dagster.lake.ports import Namespace
from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.registry import NamespaceRecord
from dpone_dagster.workspaces.service import Workspaces

CATALOG = CatalogLocation("postgres", "host=127.0.0.1 dbname=lake user=owner", "LAKE_PW")
STORAGE = StorageConfig(
    endpoint="127.0.0.1:9000", url_style="path", use_ssl=False, key_id_env="LAKE_KEY", secret_env="LAKE_SECRET"
)
S3_PATH = "s3://bucket/lakes/main/__wm_forks/wm-fork-a-0123/"
# sha256 of canonical JSON [catalog, storage model_dump with the seven pre-read-only fields,
# storage_ref, data_path], as computed by the ledger before `read_only_*`/`fork_*` existed
PRE_CHANGE_S3_KEY = "5866ef8e9cb27940172b361c4445e734fc11a2fa2f6ef865bca8a2dca906b00a"
PRE_CHANGE_LOCAL_KEY = "def4673be714af192c92a3903c3f3ac7dc6238466a7612d75013940155a79d68"


def _record(storage: StorageConfig | None, data_path: str) -> NamespaceRecord:
    return NamespaceRecord("wm-fork-a", "main", "wm_fork_a_main_0123", CATALOG, storage, "default", data_path)


def test_a_location_registered_before_the_new_storage_fields_keeps_its_key():
    assert _record(STORAGE, S3_PATH).location_key == PRE_CHANGE_S3_KEY
    assert _record(None, "/lake/__wm_forks/wm-fork-a-0123/").location_key == PRE_CHANGE_LOCAL_KEY


def test_a_configured_new_storage_field_is_part_of_the_key():
    scoped = STORAGE.model_copy(update={"fork_key_id_env": "FORK_KEY", "fork_secret_env": "FORK_SECRET"})
    assert _record(scoped, S3_PATH).location_key != PRE_CHANGE_S3_KEY
    assert '"fork_key_id_env":"FORK_KEY"' in _record(scoped, S3_PATH).storage_json


def test_catalog_inspection_connects_with_the_fork_readers_stored_password(pg_s3_lake, monkeypatch):
    env = pg_s3_lake
    Workspaces(env.config).create_fork("wm-fork-pw", "prod", owner="alice")
    location = resolve("wm-fork-pw", config=env.config).catalog
    assert isinstance(location, RoleCatalogLocation) and location.password_env is None
    stored = read_password(location.store_url, location.reader)

    seen: list[str] = []
    real_connect = psycopg.connect

    def recording_connect(conninfo, *args, **kwargs):
        seen.append(conninfo)
        return real_connect(conninfo, *args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", recording_connect)
    PostgresCatalog().inspect([Namespace(location, "public")], None)
    assert len(seen) == 1
    info = psycopg.conninfo.conninfo_to_dict(seen[0])
    assert info["user"] == location.reader and info["password"] == stored
