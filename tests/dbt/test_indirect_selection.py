"""A partial dbt selection on a fresh lake does not fail on a test that refers to an unselected model.

`stg_orders.customer_id` has a relationships test to `stg_customers`. With dbt's default (`eager`)
indirect selection, building `stg_customers` alone also runs that test, which reads `stg_orders`, a
table a fresh lake does not have yet: the run failed. The factory runs dbt with
`DBT_INDIRECT_SELECTION=cautious` (a test runs only when every model it refers to is selected).
"""

from __future__ import annotations

import pytest
from dagster import AssetKey
from dbt_lakes import LakeSetup, materialize_synthetic_dbt


def _key(schema: str, table: str) -> AssetKey:
    return AssetKey(["main", schema, table])


@pytest.mark.slow  # one dbt build of two nodes on a fresh lake (~30 s idle, minutes on two busy cores)
def test_stg_customers_alone_on_a_fresh_lake_skips_the_relationships_test_on_stg_orders(tmp_path, prepared_manifest):
    setup = LakeSetup(state_dir=tmp_path / "state")
    selection = [_key("raw", "raw_customers"), _key("staging", "stg_customers")]
    result = materialize_synthetic_dbt(setup, selection=selection)
    failures = [e.event_specific_data.error.message for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert result.success, failures
    built = {e.asset_key for e in result.get_asset_materialization_events()}
    assert built == set(selection)
    checks = {(e.asset_key.path[-1], e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks and all(checks.values()), checks
    assert not [name for name in checks if name[0] == "stg_orders"]  # the test on the unselected model did not run
    conn = setup.connect()
    try:
        tables = {row[0] for row in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        conn.close()
    assert "stg_customers" in tables and "stg_orders" not in tables
