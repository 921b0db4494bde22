"""What the SQL guard's file, metadata-catalog and foreign-database rules (issue 19) cost per statement.

Same run, same statements, interleaved rounds (best of each): the guard as it is now
(`dpone_dagster/lake/guard`, with a fork's file rules) against the guard at `BASE_REVISION` (before
those rules), extracted from git into a temporary package. The statements are what dbt sends for a
model build (CTAS with quoted names, an introspection query, a seed insert with literals) and a
`COPY … TO` into the fork's prefix. Goal: <= 1.10x. What a reader could get wrong: both sides parse
every statement with DuckDB's own parser and lexer, which dominates; the figure is the guard alone,
not a dbt run (a model build sends a few dozen statements, so even a 2x guard would be milliseconds
per model).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.timing import best_seconds, ratio_row

BASE_REVISION = "de2b7da"
GOAL = 1.10
REPO_ROOT = Path(__file__).resolve().parents[1]
STATEMENTS = [
    'create or replace table "lake_main"."marts"."fct_orders__dbt_tmp" as (\n'
    'with orders as (select * from "lake_main"."staging"."stg_orders"), payments as (select * from '
    '"lake_main"."staging"."stg_payments"), order_payments as (select order_id, sum(case when payment_method = '
    "'credit_card' then amount else 0 end) as credit_card_amount, sum(case when payment_method = 'coupon' "
    "then amount else 0 end) as coupon_amount, sum(amount) as total_amount from payments group by order_id)\n"
    "select orders.order_id, orders.customer_id, orders.order_date, orders.status, order_payments.total_amount "
    "as amount from orders left join order_payments on orders.order_id = order_payments.order_id)",
    "select table_catalog, table_schema, table_name, table_type from information_schema.tables "
    "where table_schema ilike 'marts' and table_catalog ilike 'lake_main'",
    'insert into "lake_main"."raw"."raw_orders" (id, user_id, order_date, status) values '
    + ", ".join(f"({i}, {i % 7}, '2024-01-{1 + i % 28:02d}', 'completed')" for i in range(40)),
]


def _base_guard(root: Path):
    """The guard package at BASE_REVISION, importable as `_guard_base` (its error codes renamed so
    they do not collide with the current ones in the process-wide register)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", BASE_REVISION, "dpone_dagster/lake/guard"],
        capture_output=True, check=True,
    )  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    package = root / "_guard_base"
    (root / "dpone_dagster" / "lake" / "guard").rename(package)
    for module in package.glob("*.py"):
        text = module.read_text().replace("dpone_dagster.lake.guard.", "_guard_base.")
        module.write_text(re.sub(r'code = "lake\.', 'code = "benchbase.', text))
    sys.path.insert(0, str(root))
    return importlib.import_module("_guard_base.checker").SqlGuard


def run() -> list[dict[str, object]]:
    from dpone_dagster.lake.guard.checker import SqlGuard
    from dpone_dagster.lake.guard.paths import FileRules

    with tempfile.TemporaryDirectory(prefix="dpone-bench-guard-") as folder:
        own = Path(folder) / "lakes" / "storage" / "__wm_forks" / "wm_fork_b_01234567" / "main"
        own.mkdir(parents=True)
        statements = [*STATEMENTS, f"COPY (SELECT 1 AS id) TO '{own}/export.parquet' (FORMAT parquet)"]
        ancestors = frozenset({"__wm_dl_main_prod_01234567", "__ducklake_metadata___wm_dl_main_prod_01234567"})
        now = SqlGuard(
            "lake_main", True, ancestors, FileRules((str(own),)), frozenset({"__ducklake_metadata_lake_main"})
        )
        base = _base_guard(Path(folder))("lake_main", True, ancestors)
        base_s = now_s = float("inf")
        for _ in range(9):  # interleaved, so a busy machine slows both alike
            base_s = min(base_s, best_seconds(lambda: [base.check(s) for s in statements[:-1]], 1, 10))
            now_s = min(now_s, best_seconds(lambda: [now.check(s) for s in statements[:-1]], 1, 10))
        now.check(statements[-1])  # the COPY into the fork's prefix passes the new rules
    return [
        ratio_row(
            "SQL guard check per dbt statement batch: with issue 19 file/metadata/foreign rules vs before",
            base_s, now_s, f"<= {GOAL}x",
            f"base {BASE_REVISION}; 3 statements per batch; 1-min load {os.getloadavg()[0]:.1f}",
        )
    ]  # fmt: skip


if __name__ == "__main__":
    for row in run():
        print(row)
