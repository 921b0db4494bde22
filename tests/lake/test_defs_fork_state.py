"""Fork state in Dagster, in process on the embedded lake: batched states, the observation job, the fork sensor.

Prod materializes `orders` and `order_count` through `DuckLakeResource`; a fork of prod materializes
only `order_count`. The observation job and the sensor must then say `orders` is deferred to prod
(at prod's snapshot), `order_count` is fork_materialized (at the fork's snapshot), and a table
nobody materialized is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    DefaultSensorStatus,
    MaterializeResult,
    SensorResult,
    SkipReason,
    asset,
    build_sensor_context,
    materialize,
)

from dpone_dagster.config import load_config
from dpone_dagster.defs.lake import build_defs
from dpone_dagster.integration.lake.jobs import build_fork_state_observation_job
from dpone_dagster.integration.lake.observations import ducklake_asset_keys
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.integration.lake.sensors import build_fork_state_sensor
from dpone_dagster.lake.resolution.naming import fork_metadata_schema
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.table_states import lake_table_states
from dpone_dagster.lake.state.tracking import record_materialization, state_in_chain, workspace_lake_view
from dpone_dagster.workspaces.service import Workspaces

FORK = "wm-fork-obs"
PREFIX = ["main", "main"]
ORDERS, COUNT, MISSING = (AssetKey([*PREFIX, name]) for name in ("orders", "order_count", "never_built"))
KEYS = [ORDERS, COUNT, MISSING]


@asset(key_prefix=PREFIX, kinds={"ducklake"})
def orders(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["orders"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(10)")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "orders"))


@asset(key_prefix=PREFIX, kinds={"ducklake"}, deps=[orders])
def order_count(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["order_count"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE order_count AS SELECT count(*) AS n FROM orders")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "order_count"))


@contextmanager
def acting_as(workspace: str) -> Iterator[DuckLakeResource]:
    """The `ducklake` resource of a process whose configuration names `workspace`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPONE_WORKSPACE", workspace)
        yield DuckLakeResource()


def _snapshots(result) -> dict[str, int]:
    return {
        e.asset_key.path[-1]: e.materialization.metadata["snapshot_id"].value
        for e in result.get_asset_materialization_events()
    }


@pytest.fixture
def fork_with_one_model() -> dict[str, dict[str, int]]:
    """Prod materializes both tables; the fork only `order_count`. Returns snapshot ids per workspace."""
    prod = materialize([orders, order_count], resources={"ducklake": DuckLakeResource()})
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    with acting_as(FORK) as ducklake:
        fork = materialize([orders, order_count], resources={"ducklake": ducklake}, selection=[COUNT])
    assert prod.success and fork.success
    return {"prod": _snapshots(prod), FORK: _snapshots(fork)}


def _values(event) -> dict[str, object]:
    return {k: v.value for k, v in event.metadata.items()}


def test_observation_job_reports_deferred_fork_materialized_and_absent(fork_with_one_model):
    with acting_as(FORK) as ducklake:
        job = build_fork_state_observation_job(lambda: KEYS)
        result = job.execute_in_process(resources={"ducklake": ducklake})
    assert result.success
    seen = {e.asset_key: _values(e) for e in result.asset_observations_for_node("observe_fork_state")}
    assert set(seen) == set(KEYS)
    namespace = fork_metadata_schema(FORK, "main", _incarnation(FORK))
    assert seen[ORDERS] == {
        "workspace": FORK,
        "lake": "main",
        "table": "main.orders",
        "namespace": namespace,
        "fork_state": "deferred",
        "fork_owner": "prod",
        "snapshot_id": fork_with_one_model["prod"]["orders"],
    }
    assert seen[COUNT]["fork_state"] == "fork_materialized" and seen[COUNT]["fork_owner"] == FORK
    assert seen[COUNT]["snapshot_id"] == fork_with_one_model[FORK]["order_count"]
    assert seen[MISSING] == {
        "workspace": FORK,
        "lake": "main",
        "table": "main.never_built",
        "namespace": namespace,
        "fork_state": "absent",
        "fork_owner": "none",
    }
    described = {e.asset_key: e.description for e in result.asset_observations_for_node("observe_fork_state")}
    assert described[ORDERS] == f"deferred to prod @ snapshot {fork_with_one_model['prod']['orders']}"
    assert described[COUNT] == f"materialized in fork {FORK} @ snapshot {fork_with_one_model[FORK]['order_count']}"
    assert described[MISSING].startswith("absent: ")


def test_observation_job_in_prod_says_own_and_is_stored_on_the_instance(fork_with_one_model):
    job = build_fork_state_observation_job(lambda: KEYS)
    with DagsterInstance.ephemeral() as instance:
        assert job.execute_in_process(resources={"ducklake": DuckLakeResource()}, instance=instance).success
        stored = instance.fetch_observations(ORDERS, limit=5).records
        assert len(stored) == 1
        metadata = stored[0].asset_observation.metadata
        assert metadata["fork_state"].value == "own" and metadata["namespace"].value == "(root)"
        assert metadata["snapshot_id"].value == fork_with_one_model["prod"]["orders"]


def test_the_location_observes_every_dbt_table():
    from dpone_dagster.definitions import defs as location

    keys = ducklake_asset_keys(location.get_repository_def())
    assert AssetKey(["main", "marts", "fct_orders"]) in keys
    assert all(len(k.path) == 3 and k.path[0] == "main" for k in keys)
    lake = build_defs()
    assert lake.resolve_job_def("fork_state_observation_job") is not None
    assert lake.resolve_sensor_def("fork_state_sensor") is not None


def test_without_keys_the_sensor_observes_its_code_locations_ducklake_assets(fork_with_one_model):
    """No key list: the sensor finds the `ducklake` assets in the definitions it runs in (not the dbt module)."""
    from dagster import Definitions

    location = Definitions(assets=[orders, order_count], resources={"ducklake": DuckLakeResource()})
    with acting_as(FORK) as ducklake:
        context = build_sensor_context(resources={"ducklake": ducklake}, definitions=location)
        result = build_fork_state_sensor(workspace=FORK)(context)
    assert isinstance(result, SensorResult)
    assert {e.asset_key for e in result.asset_events} == {ORDERS, COUNT}


def test_without_keys_or_code_location_the_sensor_refuses():
    from dpone_dagster.integration.lake.observations import DuckLakeAssetsUnknownError

    with acting_as(FORK) as ducklake, pytest.raises(DuckLakeAssetsUnknownError):
        build_fork_state_sensor(workspace=FORK)(build_sensor_context(resources={"ducklake": ducklake}))


def _tick(sensor, workspace: str, cursor: str | None = None):
    with acting_as(workspace) as ducklake:
        context = build_sensor_context(cursor=cursor, resources={"ducklake": ducklake})
        return sensor(context)


def test_sensor_skips_outside_a_fork(fork_with_one_model):
    result = _tick(build_fork_state_sensor(lambda: KEYS), "prod")
    assert isinstance(result, SkipReason)
    assert "'prod' is not a fork" in result.skip_message


def test_sensor_reports_after_ancestor_materializations_only(fork_with_one_model):
    sensor = build_fork_state_sensor(lambda: KEYS, workspace=FORK)
    first = _tick(sensor, FORK)
    assert isinstance(first, SensorResult) and first.cursor
    assert "(1 absent, 1 deferred, 1 fork_materialized) for the first time" in first.skip_reason.skip_message
    states = {e.asset_key: e.metadata["fork_state"].value for e in first.asset_events}
    assert states == {ORDERS: "deferred", COUNT: "fork_materialized", MISSING: "absent"}

    quiet = _tick(sensor, FORK, first.cursor)
    assert not quiet.asset_events and quiet.cursor == first.cursor
    assert quiet.skip_reason.skip_message.startswith("no ancestor materialized since 20")

    with acting_as(FORK) as fork:
        assert materialize([orders, order_count], resources={"ducklake": fork}, selection=[COUNT]).success
    assert not _tick(sensor, FORK, first.cursor).asset_events

    again = materialize([orders, order_count], resources={"ducklake": DuckLakeResource()}, selection=[ORDERS])
    assert again.success
    after = _tick(sensor, FORK, first.cursor)
    assert after.cursor != first.cursor
    assert "an ancestor materialized since 20" in after.skip_reason.skip_message
    [orders_event] = [e for e in after.asset_events if e.asset_key == ORDERS]
    assert orders_event.metadata["snapshot_id"].value == _snapshots(again)["orders"]


def test_sensor_tolerates_a_foreign_cursor_and_names_an_empty_ancestry():
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    sensor = build_fork_state_sensor(lambda: KEYS, workspace=FORK)
    first = _tick(sensor, FORK, "not json")
    assert {e.metadata["fork_state"].value for e in first.asset_events} == {"absent"}
    quiet = _tick(sensor, FORK, first.cursor)
    assert "has materialized a tracked table yet" in quiet.skip_reason.skip_message


def test_sensor_runs_by_default_only_in_a_fork():
    assert build_fork_state_sensor(lambda: KEYS, workspace=FORK).default_status == DefaultSensorStatus.RUNNING
    assert build_fork_state_sensor(lambda: KEYS, workspace="prod").default_status == DefaultSensorStatus.STOPPED


def _track(workspace: str, table: str, snapshot: int, status: str = "materialized", partition: str | None = None):
    schema, name = table.split(".")
    record_materialization(
        workspace,
        "main",
        schema,
        name,
        status=status,
        snapshot_id=snapshot,
        columns=[("id", "BIGINT")],
        partition=partition,
    )


def test_batched_states_agree_with_the_per_table_walk_over_a_chain():
    service = Workspaces(load_config())
    service.create_fork("dev", "prod", owner="alice")
    service.create_fork("wm-fork-chain", "dev", owner="alice")
    _track("prod", "s.a", 1)
    _track("prod", "s.b", 2)
    _track("dev", "s.b", 30)
    _track("prod", "s.c", 4)
    _track("wm-fork-chain", "s.c", 50)
    _track("prod", "s.d", 6)
    _track("wm-fork-chain", "s.d", 70, status="failed")
    _track("dev", "s.e", 8, status="failed")
    _track("prod", "p.f", 9, partition="2026-01")
    _track("prod", "p.f", 11, partition="2026-02")
    config = load_config()
    for workspace in ("prod", "dev", "wm-fork-chain"):
        batched = lake_table_states(workspace, "main", config)
        view = workspace_lake_view(workspace, "main", config)
        for name in [TableName("s", t) for t in "abcdeg"] + [TableName("p", "f")]:
            assert batched.of(name).state == state_in_chain(
                view.chain_ids, view.tracking, name, fork_mode=view.fork_mode
            )
    states = lake_table_states("wm-fork-chain", "main", config)
    assert states.of(TableName("s", "b")).snapshot_id == 30
    assert states.of(TableName("s", "c")).snapshot_id == 50
    assert states.of(TableName("s", "d")).snapshot_id is None
    assert states.of(TableName("p", "f")).snapshot_id == 11
    assert states.counts([TableName("s", t) for t in "abcde"]) == {"absent": 2, "deferred": 2, "fork_materialized": 1}


def _incarnation(workspace_id: str) -> str:
    from dpone_dagster.control.store import open_store
    from dpone_dagster.control.workspace_tables import incarnation_state

    with open_store(load_config().control_store).connect() as conn:
        found = incarnation_state(conn, workspace_id)
    return found[0] if found else ""
