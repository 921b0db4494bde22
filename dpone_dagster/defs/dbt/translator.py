"""How dbt_project_synthetic's nodes appear in Dagster: asset keys `<lake>/<schema>/<table>`.

A dbt model, seed or snapshot is one DuckLake table, so its asset key names that table the way the
rest of dpone-dagster does (lake, schema, table): `main/marts/fct_orders`. All of them are in the
`synthetic_dbt` group; dbt tests become asset checks on those keys (dagster-dbt's default).

What a reader could get wrong: the key uses the dbt *alias* (the relation name in the lake), not
the node name, and the lake name (`main`), not the DuckDB alias it is attached under (`lake_main`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import AssetKey
from dagster_dbt import DagsterDbtTranslator

from dpone_dagster.config import DEFAULT_LAKE

GROUP_NAME = "synthetic_dbt"
_TABLE_NODES = frozenset({"model", "seed", "snapshot"})


def table_of(dbt_resource_props: Mapping[str, Any]) -> tuple[str, str]:
    """(schema, table) of the relation a dbt node builds."""
    return dbt_resource_props["schema"], dbt_resource_props.get("alias") or dbt_resource_props["name"]


class SyntheticDbtTranslator(DagsterDbtTranslator):
    def __init__(self, lake: str = DEFAULT_LAKE) -> None:
        super().__init__()
        self.lake = lake

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> AssetKey:
        if dbt_resource_props.get("resource_type") in _TABLE_NODES:
            return AssetKey([self.lake, *table_of(dbt_resource_props)])
        return super().get_asset_key(dbt_resource_props)

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str:
        return GROUP_NAME
