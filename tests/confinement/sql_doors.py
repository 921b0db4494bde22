"""Run every file door of issue 19 from a process acting for the fork; print one JSON report.

Executed as a script (`python tests/confinement/sql_doors.py PROD_CATALOG PROD_DATA`) by
`test_doors.py`, confined through the launcher or not. The fork's lake is attached through
`resolve()` onto a *raw* DuckDB connection: no SQL guard, so what stops a door here is the kernel
(this is the user's own `duckdb.connect()` with the lake attached). After each door the report
holds the sha256 of prod's catalog and data files, read from this very process.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path

from dpone_dagster.config import load_config
from dpone_dagster.lake import duck
from dpone_dagster.lake.resolution.seam import resolve


def fingerprint(catalog: Path, data: Path) -> dict[str, str]:
    files = [catalog, *sorted(p for p in data.rglob("*") if p.is_file())]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def in_thread(action) -> None:
    """Run `action` in a thread started after confinement; re-raise what it raised."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 (re-raised in the caller)
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def doors(conn, catalog: Path, data: Path) -> dict:
    prod_file = sorted(data.rglob("*.parquet"))[0]
    metadata = "__ducklake_metadata_lake_main"
    return {
        "1_copy_over_prod_data_file": lambda: conn.execute(f"COPY (SELECT 42 AS id) TO '{prod_file}' (FORMAT parquet)"),
        "2_copy_over_prod_catalog": lambda: conn.execute(f"COPY (SELECT 'x' AS junk) TO '{catalog}' (FORMAT csv)"),
        "3_own_cleanup_list_names_prod_file": lambda: (
            conn.execute(
                f"INSERT INTO {metadata}.ducklake_files_scheduled_for_deletion "
                f"VALUES (999999, '{prod_file}', false, TIMESTAMPTZ '2000-01-01')"
            ),
            conn.execute("CALL ducklake_cleanup_old_files('lake_main', cleanup_all => true)"),
        ),
        "4_write_parquet_on_relation": lambda: conn.sql("SELECT 7 AS id").write_parquet(str(prod_file)),
        "7_copy_new_file_into_prod_folder": lambda: conn.execute(
            f"COPY (SELECT 1 AS id) TO '{data}/stray.parquet' (FORMAT parquet)"
        ),
        "7_export_database_into_prod_folder": lambda: conn.execute(f"EXPORT DATABASE memory TO '{data}/exported'"),
        "python_remove_prod_data_file": lambda: os.remove(prod_file),
        "python_overwrite_prod_catalog": lambda: Path(catalog).write_bytes(b"junk"),
        "thread_after_confinement_writes_prod_file": lambda: in_thread(lambda: open(prod_file, "ab").write(b"x")),
    }


def main(catalog: Path, data: Path) -> dict:
    config = load_config()
    resolved = resolve(config.workspace, "main", config=config, targets=["main.own_table"])
    conn = duck.connect(extensions=resolved.extensions)
    resolved.apply(conn)
    report: dict[str, object] = {"workspace": config.workspace, "doors": {}}
    for name, door in doors(conn, catalog, data).items():
        try:
            door()
            error = None
        except Exception as exc:  # noqa: BLE001 (every failure is the outcome we report)
            error = f"{type(exc).__name__}: {exc}"[:400]
        report["doors"][name] = {"error": error, "prod": fingerprint(catalog, data)}
    conn.execute("CREATE OR REPLACE TABLE lake_main.main.own_table AS SELECT range AS id FROM range(3)")
    report["own_rows"] = conn.execute("SELECT count(*) FROM lake_main.main.own_table").fetchone()[0]
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "scratch.txt"
    scratch.write_text("temp files still work")
    report["temp_write"] = scratch.read_text()
    conn.close()
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
