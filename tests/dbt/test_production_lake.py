"""The production path: the same dbt assets, a DuckLake with a PostgreSQL catalog and S3 data, and
Dagster's own storage on PostgreSQL through the documented `docs/deploy/dagster.yaml`.

Everything is real and local: the session's PostgreSQL server and moto's S3 server on 127.0.0.1.
The S3 keys reach DuckDB only by reference (DPONE_TEST_S3_KEY_ID / DPONE_TEST_S3_SECRET).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest
import yaml
from dagster import AssetKey, DagsterInstance
from dbt_lakes import MODEL_TABLES, REPO_ROOT, LakeSetup, materialize_synthetic_dbt

pytestmark = [pytest.mark.postgres, pytest.mark.s3]


def _dagster_instance(tmp_path, postgres_server, monkeypatch) -> tuple[DagsterInstance, str]:
    database = postgres_server.create_database()
    documented = yaml.safe_load((REPO_ROOT / "docs" / "deploy" / "dagster.yaml").read_text(encoding="utf-8"))
    documented.pop("run_launcher")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(documented), encoding="utf-8")
    for name, value in {
        "DAGSTER_PG_HOST": postgres_server.host,
        "DAGSTER_PG_PORT": str(postgres_server.port),
        "DAGSTER_PG_DB": database,
        "DAGSTER_PG_USER": postgres_server.user,
        "DAGSTER_PG_PASSWORD": "unused-by-trust-auth",
    }.items():
        monkeypatch.setenv(name, value)
    return DagsterInstance.from_config(str(home)), database


def _lake_setup(tmp_path, postgres_server, catalog_db, s3_server, bucket) -> LakeSetup:
    config = {
        "control_store_url": postgres_server.url(catalog_db),
        "lakes": [
            {
                "name": "main",
                "catalog": "postgres:" + postgres_server.dsn(catalog_db),
                "data_path": f"s3://{bucket}/lakes/main/",
                "storage": {
                    "endpoint": s3_server.endpoint,
                    "url_style": "path",
                    "use_ssl": False,
                    "region": s3_server.region,
                    "key_id_env": "DPONE_TEST_S3_KEY_ID",
                    "secret_env": "DPONE_TEST_S3_SECRET",
                },
            }
        ],
    }
    path = tmp_path / "dpone.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return LakeSetup(tmp_path / "state", extra_env={"DPONE_CONFIG": str(path)})


@dataclass(frozen=True)
class ProductionRun:
    setup: LakeSetup
    result: object
    instance: DagsterInstance
    catalog_db: str
    dagster_db: str
    bucket: str


@pytest.fixture(scope="module")
def production_run(tmp_path_factory, postgres_server, s3_server, prepared_manifest):
    """One materialization for the module (the per-test `pg_database`/`s3_bucket` are not)."""
    tmp_path = tmp_path_factory.mktemp("production")
    catalog_db = postgres_server.create_database()
    bucket = s3_server.create_bucket()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("DPONE_TEST_S3_KEY_ID", s3_server.key_id)
        monkeypatch.setenv("DPONE_TEST_S3_SECRET", s3_server.secret)
        instance, dagster_db = _dagster_instance(tmp_path, postgres_server, monkeypatch)
        setup = _lake_setup(tmp_path, postgres_server, catalog_db, s3_server, bucket)
        try:
            result = materialize_synthetic_dbt(setup, instance=instance)
            yield ProductionRun(setup, result, instance, catalog_db, dagster_db, bucket)
        finally:
            instance.dispose()


def test_dbt_assets_land_in_a_postgres_catalog_and_s3(production_run, postgres_server, s3_server, monkeypatch):
    monkeypatch.setenv("DPONE_TEST_S3_KEY_ID", s3_server.key_id)
    monkeypatch.setenv("DPONE_TEST_S3_SECRET", s3_server.secret)
    setup, result, pg_database, s3_bucket = (
        production_run.setup,
        production_run.result,
        production_run.catalog_db,
        production_run.bucket,
    )
    assert result.success
    assert all(c.passed for c in result.get_asset_check_evaluations())

    with psycopg.connect(postgres_server.dsn(pg_database)) as pg:
        live = pg.execute(
            "SELECT s.schema_name, t.table_name FROM ducklake_table t "
            "JOIN ducklake_schema s ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL "
            "WHERE t.end_snapshot IS NULL ORDER BY 1, 2"
        ).fetchall()
        (data_files,) = pg.execute("SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NULL").fetchone()
    assert tuple(live) == MODEL_TABLES
    assert data_files >= len(MODEL_TABLES)

    objects = set(s3_server.keys(s3_bucket, "lakes/main/"))
    client = s3_server.client()
    conn = setup.connect()
    try:
        for schema, table in MODEL_TABLES:
            files = [
                r[0]
                for r in conn.execute(
                    "SELECT data_file FROM ducklake_list_files('lake_main', ?, schema => ?)", [table, schema]
                ).fetchall()
            ]
            assert files, f"{schema}.{table} has no data file"
            for url in files:
                key = url.removeprefix(f"s3://{s3_bucket}/")
                assert key in objects, f"{url} is not in the bucket"
                head = client.get_object(Bucket=s3_bucket, Key=key, Range="bytes=0-3")["Body"].read()
                assert head == b"PAR1"
        orders = conn.execute(
            "SELECT count(*), sum(net_amount) = sum(amount_paid - amount_refunded) FROM lake_main.marts.fct_orders"
        ).fetchone()
        customers = conn.execute("SELECT count(DISTINCT email) FROM lake_main.staging.stg_customers").fetchone()
    finally:
        conn.close()
    assert orders == (61 * 150, True)
    assert customers == (2000,)


def test_dagster_run_history_is_stored_in_postgres_without_credentials(production_run, postgres_server, s3_server):
    result, instance, dagster_db = production_run.result, production_run.instance, production_run.dagster_db
    assert result.success
    for schema, table in MODEL_TABLES:
        event = instance.get_latest_materialization_event(AssetKey(["main", schema, table]))
        assert event is not None and event.run_id == result.run_id
    with psycopg.connect(postgres_server.dsn(dagster_db)) as pg:
        (runs,) = pg.execute("SELECT count(*) FROM runs WHERE run_id = %s", [result.run_id]).fetchone()
        (materializations,) = pg.execute(
            "SELECT count(*) FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
            [result.run_id],
        ).fetchone()
        (leaks,) = pg.execute(
            "SELECT count(*) FROM event_logs WHERE strpos(event, %s) > 0 OR strpos(event, %s) > 0",
            [s3_server.secret, s3_server.key_id],
        ).fetchone()
    assert leaks == 0
    assert runs == 1
    assert materializations == len(MODEL_TABLES)
