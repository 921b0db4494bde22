"""`dpone fork diff`: a known change in a fork is reported exactly, on both backends.

The parent (`prod`) has `orders` (id, amount, status); the fork rebuilds it with one row removed
(id 1), one added (id 9), two changed (ids 2, 3), a column dropped (`status`), a column added
(`note`) and a type changed (`amount` INTEGER → DOUBLE). The diff must report exactly that.
"""

from __future__ import annotations

import pytest

from dpone_dagster.contracts import canonical
from dpone_dagster.errors import DponeError
from dpone_dagster.lake.lifecycle.diff import diff_id_of, fork_diff, recorded_diff, unique_keys
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.workspaces.service import Workspaces

from .lakes import materialize, run_sql

FORK = "wm-fork-diff"
PARENT_ORDERS = (
    "SELECT * FROM (VALUES (1, 10, 'new'), (2, 20, 'new'), (3, 30, 'paid'), (4, 40, 'paid'), (5, 50, 'paid')) "
    "AS t(id, amount, status)"
)
FORK_ORDERS = (
    "SELECT id, amount::DOUBLE AS amount, note FROM (VALUES (2, 21, 'x'), (3, 30, 'y'), (4, 40, NULL), "
    "(5, 50, NULL), (9, 90, 'z')) AS t(id, amount, note)"
)


def as_fork(env, workspace=FORK):
    return env.config.model_copy(update={"workspace": workspace})


def _fork_with_known_change(env):
    materialize(env, "prod", "orders", PARENT_ORDERS)
    materialize(env, "prod", "customers", "SELECT range AS id FROM range(3)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", FORK_ORDERS)
    return env


@pytest.fixture
def forked(lake_env):
    """Both backends (PostgreSQL + S3 costs about 20 s of setup per test: used where the backend matters)."""
    return _fork_with_known_change(lake_env)


@pytest.fixture
def forked_embedded(embedded_lake):
    return _fork_with_known_change(embedded_lake)


@pytest.mark.slow  # about 20 s on PostgreSQL + S3
def test_a_known_change_is_reported_exactly_and_its_identity_names_the_parent_snapshot(forked):
    diff = fork_diff(FORK, key=["id"], config=as_fork(forked))
    assert [t["table"] for t in diff.tables] == ["main.orders"], "only fork-materialized tables"
    entry = diff.table("orders")
    assert entry["owner"] == "prod"
    assert (entry["parent_rows"], entry["fork_rows"]) == (5, 5)
    assert entry["schema"] == {
        "added": [["note", "VARCHAR"]],
        "removed": [["status", "VARCHAR"]],
        "type_changed": [["amount", "INTEGER", "DOUBLE"]],
    }
    assert entry["rows"] == {"added": 1, "removed": 1, "changed": 1}
    assert entry["sample"]["added"] == [{"id": 9}]
    assert entry["sample"]["removed"] == [{"id": 1}]
    # across the type change 30 and 30.0 are equal; only id 2's amount (20 -> 21.0) changed
    assert entry["sample"]["changed"] == [{"key": {"id": 2}, "columns": {"amount": {"parent": 20, "fork": 21.0}}}]
    assert isinstance(entry["parent_snapshot"], int) and isinstance(entry["fork_snapshot"], int)
    assert "+1 / -1 / ~1" in diff.markdown("orders")

    config = as_fork(forked)
    first = diff
    again = fork_diff(FORK, key=["id"], config=config)
    assert first.diff_id == again.diff_id == diff_id_of(canonical.loads_canonical(canonical.dumps(first.document)))
    assert recorded_diff(forked.config, first.diff_id).document == first.document

    materialize(forked, "prod", "orders", PARENT_ORDERS + " UNION ALL SELECT 6, 60, 'paid'")
    moved = fork_diff(FORK, key=["id"], config=config)
    assert moved.diff_id != first.diff_id
    assert moved.table("orders")["parent_snapshot"] > first.table("orders")["parent_snapshot"]
    assert moved.table("orders")["rows"]["removed"] == 2


def test_without_a_key_only_schema_and_counts(forked_embedded):
    entry = fork_diff(FORK, config=as_fork(forked_embedded)).table("orders")
    assert entry["key"] is None and entry["rows"] is None
    assert (entry["parent_rows"], entry["fork_rows"]) == (5, 5)


def test_the_sample_is_capped_and_ordered_by_key(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "t", "SELECT range AS id, 0 AS v FROM range(3000) ORDER BY hash(range)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "t", "SELECT range AS id, 1 AS v FROM range(3000) ORDER BY hash(range * 7)")
    entry = fork_diff(FORK, key=["id"], config=as_fork(env), cap=5).table("t")
    assert entry["rows"]["changed"] == 3000
    assert [row["key"]["id"] for row in entry["sample"]["changed"]] == [0, 1, 2, 3, 4]


def test_refusals(forked_embedded):
    forked = forked_embedded
    with pytest.raises(DponeError) as not_fork:
        fork_diff(FORK, key=["id"], config=forked.config)  # prod's process
    assert not_fork.value.code == "fork.diff_not_in_fork"
    with pytest.raises(DponeError) as deferred:
        fork_diff(FORK, ["customers"], config=as_fork(forked))
    assert deferred.value.code == "fork.diff_not_fork_materialized"
    with pytest.raises(DponeError) as bad_key:
        fork_diff(FORK, key=["status"], config=as_fork(forked))
    assert bad_key.value.code == "fork.diff_key_invalid"
    materialize(forked, FORK, "orders", "SELECT 1 AS id UNION ALL SELECT 1")
    with pytest.raises(DponeError) as dupes:
        fork_diff(FORK, key=["id"], config=as_fork(forked))
    assert dupes.value.code == "fork.diff_key_not_unique"


def test_keys_come_from_dbt_unique_tests():
    manifest = {
        "nodes": {
            "model.p.orders": {"resource_type": "model", "schema": "marts", "name": "orders", "alias": "orders"},
            "model.p.rev": {"resource_type": "model", "schema": "marts", "name": "rev", "alias": None},
            "test.p.u1": {
                "resource_type": "test",
                "attached_node": "model.p.orders",
                "test_metadata": {"name": "unique", "kwargs": {"column_name": "order_id"}},
            },
            "test.p.nn": {
                "resource_type": "test",
                "attached_node": "model.p.orders",
                "test_metadata": {"name": "not_null", "kwargs": {"column_name": "amount"}},
            },
            "test.p.u2": {
                "resource_type": "test",
                "attached_node": "model.p.rev",
                "test_metadata": {"name": "unique", "kwargs": {"column_name": "a || '|' || b"}},
            },
        }
    }
    assert unique_keys(manifest) == {TableName("marts", "orders"): ("order_id",)}


def test_the_parents_changes_since_the_build_come_from_the_change_feed(forked_embedded):
    forked = forked_embedded
    run_sql(forked, "prod", "INSERT INTO lake_main.main.orders VALUES (6, 60, 'paid'), (7, 70, 'paid')")
    entry = fork_diff(FORK, key=["id"], since_pin=True, config=as_fork(forked)).table("orders")
    changes = entry["parent_changes"]
    assert changes["counts"] == {"insert": 2}
    assert changes["since"] < changes["to"] == entry["parent_snapshot"]
