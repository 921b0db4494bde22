"""Per-partition defer end to end: the daily-partitioned dbt model through Dagster, in prod and a fork.

Prod builds `stg_orders` (upstream) and three day-partitions of `marts.daily_order_totals`; a fork
builds one of them (its `stg_orders` is a defer view onto prod). The fork's day is then marked in its
hidden table (`daily_order_totals__fork`) so the test can tell whose row a read returns: reading the
table in the fork gives prod's rows for the two other days and the fork's for its own, compared with
independent queries (prod read as prod, the hidden table read directly). Prod is unchanged, fork status
lists exactly that day, and dropping the fork removes its catalog namespace and every file it wrote.
Runs on the embedded default and on PostgreSQL + S3.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dagster import AssetKey
from dbt_lakes import LakeSetup

from tests.lake.lakes import LakeEnv, fork_places

pytestmark = pytest.mark.slow

FORK = "wm-fork-daily"
DAILY = AssetKey(["main", "marts", "daily_order_totals"])
UPSTREAM = [  # stg_orders with what its relationships test reads
    AssetKey(["main", *name.split(".")])
    for name in ("raw.raw_orders", "staging.stg_orders", "raw.raw_customers", "staging.stg_customers")
]
DAYS = ("2024-01-10", "2024-01-11", "2024-01-12")
MARK = 1_000_000
ORDER = (
    "SELECT order_date::VARCHAR, order_count, customer_count, order_amount "
    "FROM lake_main.marts.{table} {where} ORDER BY 1"
)


def _materialize(setup: LakeSetup, assets, *, selection, partition_key=None, partition_range=None):
    from dagster import materialize

    from dpone_dagster.definitions import defs

    tags = None
    if partition_range:  # one run over a range of days (the asset's single-run backfill policy)
        tags = {
            "dagster/asset_partition_range_start": partition_range[0],
            "dagster/asset_partition_range_end": partition_range[1],
        }
    with setup.applied():
        return materialize(
            [assets],
            resources=dict(defs.resources or {}),
            selection=selection,
            partition_key=partition_key,
            tags=tags,
            raise_on_error=False,
        )


def _read(setup: LakeSetup, workspace: str, sql: str) -> list[tuple]:
    with setup.applied():
        conn = setup.connect(workspace=workspace)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()


def _env(setup: LakeSetup, list_files) -> LakeEnv:
    return LakeEnv("dbt", setup.config(), list_files)


def _scenario(setup: LakeSetup, list_files) -> None:
    from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets
    from dpone_dagster.defs.dbt.partitioned import synthetic_dbt_daily_assets
    from dpone_dagster.lake.resolution.seam import resolve
    from dpone_dagster.workspaces.service import Workspaces
    from dpone_dagster.workspaces.status import workspace_status

    assert _materialize(setup, synthetic_dbt_assets, selection=UPSTREAM).success
    built = _materialize(setup, synthetic_dbt_daily_assets, selection=[DAILY], partition_range=(DAYS[0], DAYS[-1]))
    assert built.success
    assert sorted(e.partition for e in built.get_asset_materialization_events()) == list(DAYS)
    prod_rows = _read(setup, "prod", ORDER.format(table="daily_order_totals", where=""))
    assert [r[0] for r in prod_rows] == list(DAYS)
    prod_snapshots = _read(setup, "prod", "SELECT snapshot_id FROM lake_main.snapshots() ORDER BY 1")

    config = setup.config()
    with setup.applied():
        Workspaces(config).create_fork(FORK, "prod", owner="tester")
    fork = LakeSetup(setup.state_dir, extra_env={**setup.extra_env, "DPONE_WORKSPACE": FORK})
    result = _materialize(fork, synthetic_dbt_daily_assets, selection=[DAILY], partition_key=DAYS[1])
    assert result.success
    (event,) = result.get_asset_materialization_events()
    metadata = {k: v.value for k, v in event.materialization.metadata.items()}
    assert event.partition == DAYS[1] and metadata["fork_state"] == "fork_materialized"
    assert (
        metadata["dagster/row_count"] == 1 and metadata["table_rows"] == 3 and metadata["partition_by"] == "order_date"
    )
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)

    with fork.applied():
        conn = fork.connect(workspace=FORK)
        try:
            conn.execute(f"UPDATE lake_main.marts.daily_order_totals__fork SET order_count = order_count + {MARK}")
            seen = conn.execute(ORDER.format(table="daily_order_totals", where="")).fetchall()
            own = conn.execute(ORDER.format(table="daily_order_totals__fork", where="")).fetchall()
            kinds = dict(
                conn.execute(
                    "SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = 'lake_main' "
                    "AND table_schema = 'marts'"
                ).fetchall()
            )
        finally:
            conn.close()
        steady = resolve(FORK, "main", config=fork.config()).views
    others = _read(
        setup, "prod", ORDER.format(table="daily_order_totals", where=f"WHERE order_date <> DATE '{DAYS[1]}'")
    )
    assert kinds == {"daily_order_totals": "VIEW", "daily_order_totals__fork": "BASE TABLE"}
    assert [r[0] for r in own] == [DAYS[1]] and own[0][1] > MARK
    assert seen == sorted(others + own) and len(seen) == 3
    assert steady == ()
    assert _read(setup, "prod", ORDER.format(table="daily_order_totals", where="")) == prod_rows
    assert _read(setup, "prod", "SELECT snapshot_id FROM lake_main.snapshots() ORDER BY 1") == prod_snapshots

    with fork.applied():
        status = workspace_status(FORK, fork.config())
    tables = {t.table: t.partitions for t in status.lakes[0].tables}
    assert tables["marts.daily_order_totals"] == [DAYS[1]]
    assert {name for name, parts in tables.items() if parts} == {"marts.daily_order_totals"}

    env = _env(setup, list_files)
    namespaces, files = fork_places(env, FORK)
    assert namespaces and any(f.endswith(".parquet") for f in files)
    with setup.applied():
        dropped = Workspaces(config).drop(FORK, actor="tester")
    assert dropped.cleanup.complete
    assert fork_places(env, FORK) == ([], [])
    assert _read(setup, "prod", ORDER.format(table="daily_order_totals", where="")) == prod_rows


def test_per_partition_defer_on_the_embedded_lake(tmp_path, prepared_manifest):
    def list_files(prefix: str) -> list[str]:
        root = Path(prefix)
        return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []

    _scenario(LakeSetup(tmp_path / "state"), list_files)


@pytest.mark.postgres
@pytest.mark.s3
def test_per_partition_defer_on_postgres_and_s3(tmp_path, prepared_manifest, postgres_server, s3_server, monkeypatch):
    monkeypatch.setenv("DPONE_TEST_S3_KEY_ID", s3_server.key_id)
    monkeypatch.setenv("DPONE_TEST_S3_SECRET", s3_server.secret)
    database = postgres_server.create_database()
    bucket = s3_server.create_bucket()
    config = {
        "control_store_url": postgres_server.url(database),
        "lakes": [
            {
                "name": "main",
                "catalog": "postgres:" + postgres_server.dsn(database),
                "data_path": f"s3://{bucket}/lakes/main/",
                "attach_args": {
                    "DATA_INLINING_ROW_LIMIT": 0
                },  # the fork's one-row day is a file in S3, not catalog rows
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

    def list_files(prefix: str) -> list[str]:
        key_prefix = prefix.removeprefix(f"s3://{bucket}/")
        return [f"s3://{bucket}/{k}" for k in s3_server.keys(bucket, key_prefix)]

    _scenario(LakeSetup(tmp_path / "state", extra_env={"DPONE_CONFIG": str(path)}), list_files)
