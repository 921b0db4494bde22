"""What the dbt translator puts in the definitions: the `ducklake` kind, and in a fork the `fork` kind and
`dpone/workspace` tag, never the fork state (it goes stale; it lives in events, see tests/lake/test_defs_fork_state.py).

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
from dpone_dagster.defs.dbt.translator import SyntheticDbtTranslator
from dpone_dagster.integration.dbt.translator import FORK_KIND, WORKSPACE_TAG, tag_value
from dpone_dagster.lake.dbt_reads import table_of
from dpone_dagster.lake.state.tracking import record_materialization
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
        spec.key: spec for spec in (translator.get_asset_spec(manifest, uid, DBT_PROJECT) for uid in _tables(manifest))
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
        assert "ducklake" in spec.kinds and "dbt" in spec.kinds and FORK_KIND not in spec.kinds
        assert not any(key.startswith("dpone/") for key in spec.tags)


def test_a_fork_gets_the_fork_kind_and_its_workspace_but_no_state_that_could_go_stale(manifest):
    """The state lives in events (materializations, observations); a definition would contradict the next run."""
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    tables = _tables(manifest)
    before = _specs(manifest, SyntheticDbtTranslator(workspace=FORK))
    _track("prod", [t for t in tables.values() if t != ("marts", "fct_orders")])
    _track(FORK, [("marts", "fct_orders")])
    after = _specs(manifest, SyntheticDbtTranslator(workspace=FORK))
    for key, spec in after.items():
        assert spec.kinds == before[key].kinds and spec.tags == before[key].tags
        assert {"ducklake", FORK_KIND} <= spec.kinds
        assert not spec.kinds & {"deferred", "fork_materialized", "absent", "unknown"}
        assert {k: v for k, v in spec.tags.items() if k.startswith("dpone/")} == {WORKSPACE_TAG: FORK}


def test_loading_the_specs_in_a_fork_reads_no_control_store(manifest):
    """Nothing about the fork's state is read at load, so a control store that is down cannot fail the location."""
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    _track("prod", list(_tables(manifest).values()))
    engine = open_store(load_config().control_store)
    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        specs = _specs(manifest, SyntheticDbtTranslator(workspace="wm-fork-never-created"))
        specs.update(_specs(manifest, SyntheticDbtTranslator(workspace=FORK)))
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len(specs) > 5 and statements == []


@pytest.mark.parametrize("owner", ["prod", "team/dev", "team_dev", "x" * 200, "a.b-c_d"])
def test_owner_tag_values_are_valid_and_distinct(owner):
    value = tag_value(owner)
    assert len(value) <= 63 and all(c.isalnum() or c in "_.-" for c in value)
    assert (value == owner) == (len(owner) <= 63 and "/" not in owner)
    assert tag_value("team/dev") != tag_value("team_dev")
