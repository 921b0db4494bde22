"""Fork state at a glance: the dbt translator's `ducklake` kind and `dpone/fork_state` tags at load.

Tracking rows are recorded the way a managed materialize records them (no dbt run needed): prod
owns every dbt table, and the fork owns one. Specs are then built from the real manifest.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from dagster import AssetKey

from dpone_dagster.config import load_config
from dpone_dagster.control.store import open_store
from dpone_dagster.defs.dbt.assets import DBT_PROJECT
from dpone_dagster.defs.dbt.translator import (
    FORK_OWNER_TAG,
    FORK_STATE_ERROR_TAG,
    FORK_STATE_TAG,
    SyntheticDbtTranslator,
    table_of,
    tag_value,
)
from dpone_dagster.lake.tracking import record_materialization
from dpone_dagster.workspaces.service import Workspaces

FORK = "wm-fork-tags"
FCT_ORDERS = AssetKey(["main", "marts", "fct_orders"])


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads(DBT_PROJECT.manifest_path.read_text(encoding="utf-8"))


def _tables(manifest: dict) -> dict[str, tuple[str, str]]:
    return {
        uid: table_of(node)
        for uid, node in manifest["nodes"].items()
        if node["resource_type"] in ("model", "seed", "snapshot")
    }


def _specs(manifest: dict, translator: SyntheticDbtTranslator) -> dict:
    return {
        spec.key: spec
        for spec in (translator.get_asset_spec(manifest, uid, DBT_PROJECT) for uid in _tables(manifest))
    }


def _track(workspace: str, tables) -> None:
    for schema, table in tables:
        record_materialization(
            workspace, "main", schema, table, status="materialized", snapshot_id=1, columns=[("id", "BIGINT")]
        )


def test_prod_gets_the_ducklake_kind_and_no_fork_tags(manifest):
    specs = _specs(manifest, SyntheticDbtTranslator())
    assert FCT_ORDERS in specs
    for spec in specs.values():
        assert "ducklake" in spec.kinds and "dbt" in spec.kinds
        assert not any(key.startswith("dpone/") for key in spec.tags)


def test_a_fork_shows_deferred_and_fork_materialized_as_tags_and_kinds(manifest):
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    tables = _tables(manifest)
    _track("prod", [t for t in tables.values() if t != ("marts", "fct_orders")])
    _track(FORK, [("marts", "fct_orders")])
    specs = _specs(manifest, SyntheticDbtTranslator(workspace=FORK))
    fct = specs[FCT_ORDERS]
    assert fct.tags[FORK_STATE_TAG] == "fork_materialized" and FORK_OWNER_TAG not in fct.tags
    assert {"ducklake", "fork_materialized"} <= fct.kinds
    upstream = specs[AssetKey(["main", "staging", "stg_orders"])]
    assert upstream.tags[FORK_STATE_TAG] == "deferred" and upstream.tags[FORK_OWNER_TAG] == "prod"
    assert "deferred" in upstream.kinds
    states = {spec.tags[FORK_STATE_TAG] for spec in specs.values()}
    assert states == {"deferred", "fork_materialized"}


def test_untracked_tables_read_absent_in_a_fork(manifest):
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    specs = _specs(manifest, SyntheticDbtTranslator(workspace=FORK))
    assert {spec.tags[FORK_STATE_TAG] for spec in specs.values()} == {"absent"}


def test_an_unknown_workspace_loads_with_an_unknown_state_instead_of_failing(manifest):
    specs = _specs(manifest, SyntheticDbtTranslator(workspace="wm-fork-never-created"))
    fct = specs[FCT_ORDERS]
    assert fct.tags[FORK_STATE_TAG] == "unknown"
    assert fct.tags[FORK_STATE_ERROR_TAG] == "workspace.unknown"
    assert fct.kinds >= {"ducklake"} and "unknown" not in fct.kinds


def test_state_is_read_in_a_constant_number_of_queries(manifest):
    """One batched pass: the statements run at load do not grow with the number of tracked tables."""
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    engine = open_store(load_config().control_store)
    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        _specs(manifest, SyntheticDbtTranslator(workspace=FORK))
        with_none = len(statements)
        _track("prod", list(_tables(manifest).values()))
        statements.clear()
        _specs(manifest, SyntheticDbtTranslator(workspace=FORK))
        with_all = len(statements)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len(_tables(manifest)) > 5
    assert 0 < with_all == with_none


@pytest.mark.parametrize("owner", ["prod", "team/dev", "team_dev", "x" * 200, "a.b-c_d"])
def test_owner_tag_values_are_valid_and_distinct(owner):
    value = tag_value(owner)
    assert len(value) <= 63 and all(c.isalnum() or c in "_.-" for c in value)
    assert (value == owner) == (len(owner) <= 63 and "/" not in owner)
    assert tag_value("team/dev") != tag_value("team_dev")
