"""Root (non-fork) resolution on the embedded default and on PostgreSQL + S3."""

from __future__ import annotations

import os

import pytest

from dpone_dagster.errors import DponeError, LakeError
from dpone_dagster.lake.duck import connect
from dpone_dagster.lake.resolution.seam import resolve


def test_root_attach_writes_and_reads_real_files(lake_env):
    resolved = resolve("prod", "main", config=lake_env.config)
    assert resolved.alias == "lake_main" and not resolved.fork_mode and resolved.namespace == ""
    conn = connect()
    resolved.apply(conn)
    conn.execute("CREATE TABLE lake_main.orders AS SELECT range AS id FROM range(100)")
    conn.close()

    conn = connect()
    resolve("prod", config=lake_env.config).apply(conn)
    assert conn.execute("SELECT sum(id) FROM lake_main.orders").fetchone()[0] == sum(range(100))
    conn.close()
    files = lake_env.list_files(resolved.data_path)
    assert files and all(f.endswith(".parquet") for f in files)


def test_statements_redact_credentials(pg_s3_lake):
    resolved = resolve("prod", config=pg_s3_lake.config)
    shown = "\n".join(resolved.statements())
    assert resolved.data_path in shown and "ATTACH 'ducklake:postgres:" in shown
    secret = os.environ["DPONE_TEST_S3_SECRET"]
    key_id = os.environ["DPONE_TEST_S3_KEY_ID"]
    assert secret not in shown and key_id not in shown and "<redacted>" in shown
    real = "\n".join(resolved.statements(redact=False))
    assert secret in real and key_id in real
    assert secret not in repr(resolved)


def test_catalog_password_is_a_reference_rendered_only_on_demand(pg_s3_lake, monkeypatch):
    lake_env = pg_s3_lake
    lake = lake_env.lake.model_copy(update={"catalog_password_env": "DPONE_TEST_PG_PASSWORD"})
    config = lake_env.config.model_copy(update={"lakes": (lake,)})
    monkeypatch.setenv("DPONE_TEST_PG_PASSWORD", "it's s3cret")
    resolved = resolve("prod", config=config)
    shown = "\n".join(resolved.statements())
    assert "(TYPE postgres, PASSWORD '<redacted>')" in shown and "s3cret" not in shown
    real = "\n".join(resolved.statements(redact=False))
    # a DuckDB secret holds it (never the ATTACH text), as a SQL literal: the quote doubled
    assert "PASSWORD 'it''s s3cret'" in real and "password=" not in real


def test_missing_credential_fails_with_a_typed_error(pg_s3_lake, monkeypatch):
    lake_env = pg_s3_lake
    monkeypatch.delenv("DPONE_TEST_S3_SECRET")
    resolved = resolve("prod", config=lake_env.config)
    conn = connect()
    with pytest.raises(DponeError) as caught:
        resolved.apply(conn)
    assert caught.value.code == "config.secret_missing"
    assert "DPONE_TEST_S3_SECRET" in caught.value.message


def test_data_path_in_attach_args_is_refused(embedded_lake):
    lake_env = embedded_lake
    lake = lake_env.lake.model_copy(update={"attach_args": {"data_path": "/elsewhere/"}})
    config = lake_env.config.model_copy(update={"lakes": (lake,)})
    with pytest.raises(LakeError) as caught:
        resolve("prod", config=config)
    assert caught.value.code == "lake.reserved_option"


def test_targets_must_be_table_names(embedded_lake):
    lake_env = embedded_lake
    with pytest.raises(LakeError):
        resolve("prod", config=lake_env.config, targets="orders")
    with pytest.raises(LakeError):
        resolve("prod", config=lake_env.config, targets=["a.b.c"])
