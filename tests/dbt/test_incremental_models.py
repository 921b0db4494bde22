"""The incremental (merge) and SCD2 models give the same answer as a rebuild, and keep history.

Time passes in the synthetic world by raising the `synthetic_as_of_day` var: orders move through
their statuses, returns are refunded and customers change segment. Lake `advanced` is built on day
60 and then incrementally on day 75; lake `rebuilt` is built from scratch on day 75.
"""

from __future__ import annotations

import pytest
from dbt_lakes import LakeSetup

DAY_1 = '{"synthetic_as_of_day": 60}'
DAY_2 = '{"synthetic_as_of_day": 75}'
INCREMENTAL_MODELS = ("+fct_orders", "+dim_customers_scd2")


def _all(setup: LakeSetup, table: str, order_by: str) -> list[tuple]:
    return setup.rows(f"SELECT * FROM lake_main.{table} ORDER BY {order_by}")


@pytest.fixture(scope="module")
def lakes(tmp_path_factory, prepared_manifest):
    advanced = LakeSetup(tmp_path_factory.mktemp("advanced"))
    advanced.dbt("run", "--vars", DAY_1, "--select", *INCREMENTAL_MODELS)
    day_1_orders = _all(advanced, "marts.fct_orders", "order_id")
    advanced.dbt("build", "--vars", DAY_2, "--select", *INCREMENTAL_MODELS)
    rebuilt = LakeSetup(tmp_path_factory.mktemp("rebuilt"))
    rebuilt.dbt("run", "--vars", DAY_2, "--select", *INCREMENTAL_MODELS)
    return advanced, rebuilt, day_1_orders


@pytest.mark.slow  # two generated lakes built and compared (~1.5 min)
def test_generator_is_deterministic_across_runs(lakes):
    advanced, rebuilt, _ = lakes
    for table, key in (
        ("raw.raw_customers", "customer_id"),
        ("raw.raw_orders", "order_id"),
        ("raw.raw_payments", "payment_id"),
    ):
        assert _all(advanced, table, key) == _all(rebuilt, table, key), table


def test_incremental_fct_orders_equals_a_rebuild(lakes):
    advanced, rebuilt, day_1_orders = lakes
    incremental = _all(advanced, "marts.fct_orders", "order_id")
    assert incremental == _all(rebuilt, "marts.fct_orders", "order_id")
    assert len(incremental) == 76 * 150 > len(day_1_orders) == 61 * 150
    before = {row[0]: row for row in day_1_orders}
    changed = [row for row in incremental if row[0] in before and row != before[row[0]]]
    assert changed, "no existing order was updated by the merge"


def test_scd2_closes_changed_versions_and_opens_new_ones(lakes):
    advanced, rebuilt, _ = lakes
    history = advanced.rows(
        "SELECT customer_id, segment, country_code, valid_from, valid_to, is_current "
        "FROM lake_main.marts.dim_customers_scd2 ORDER BY customer_id, valid_from"
    )
    by_customer: dict[int, list[tuple]] = {}
    for row in history:
        by_customer.setdefault(row[0], []).append(row)
    changed = {cid: rows for cid, rows in by_customer.items() if len(rows) > 1}
    assert changed, "no customer changed between the two as-of days"
    for rows in changed.values():
        for closed, opened in zip(rows, rows[1:]):
            assert closed[5] is False and closed[4] == opened[3]
            assert closed[1:3] != opened[1:3]
        assert rows[-1][5] is True and rows[-1][4] is None
    current = sorted((r[0], r[1], r[2]) for r in history if r[5])
    rebuilt_current = rebuilt.rows(
        "SELECT customer_id, segment, country_code FROM lake_main.marts.dim_customers_scd2 "
        "WHERE is_current ORDER BY customer_id"
    )
    assert current == rebuilt_current


def test_rerunning_the_same_day_changes_nothing(lakes):
    advanced, _, _ = lakes
    before = (
        _all(advanced, "marts.fct_orders", "order_id"),
        _all(advanced, "marts.dim_customers_scd2", "customer_version_id"),
    )
    advanced.dbt("build", "--vars", DAY_2, "--select", "fct_orders", "dim_customers_scd2")
    after = (
        _all(advanced, "marts.fct_orders", "order_id"),
        _all(advanced, "marts.dim_customers_scd2", "customer_version_id"),
    )
    assert after == before
