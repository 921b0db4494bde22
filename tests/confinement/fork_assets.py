"""A small code location for `test_dagster_doors.py`: user Python in fork assets, run by `dagster asset materialize`.

`copy_door` opens a plain `duckdb.connect()` (nothing of dpone in between) and COPYs onto a prod data
file; `remove_door` deletes one with `os.remove`; `own_table` writes the fork's own lake through the
`ducklake` resource. The prod file comes in `DOOR_PROD_FILE` (test-only).
"""

import os

import duckdb
from dagster import Definitions, MaterializeResult, asset

from dpone_dagster.integration.lake.resources import DuckLakeResource


@asset
def copy_door() -> None:
    conn = duckdb.connect()
    conn.execute(f"COPY (SELECT 42 AS id) TO '{os.environ['DOOR_PROD_FILE']}' (FORMAT parquet)")


@asset
def remove_door() -> None:
    os.remove(os.environ["DOOR_PROD_FILE"])


@asset
def own_table(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["main.own_table"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE main.own_table AS SELECT range AS id FROM range(3)")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "main.own_table"))


defs = Definitions(assets=[copy_door, remove_door, own_table], resources={"ducklake": DuckLakeResource()})
