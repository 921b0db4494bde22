"""How a fork-aware dbt project's nodes appear in Dagster: keys `<lake>/<schema>/<table>`, kinds, fork tags.

A dbt model, seed or snapshot is one DuckLake table, so its asset key names that table the way the
rest of dpone-dagster does (lake, schema, table): `main/marts/fct_orders`. All of them carry the
`ducklake` kind and sit in the translator's `group_name` (when given), else dbt's own group config
or `default` for a project given none; dbt tests become asset checks on those keys
(dagster-dbt's default). When the code location loads for any workspace other than `prod`, each
table also gets the kind `fork` and the tag `dpone/workspace` (the fork it is defined for): facts
that hold as long as the definitions do.

What a reader could get wrong: the key uses the dbt *alias* (the relation name in the lake), not
the node name, and the lake name (`main`), not the DuckDB alias it is attached under (`lake_main`).
The fork *state* (deferred, fork_materialized, absent) is deliberately not in the definitions: a
definition is a picture of the load and would contradict the next run until "Reload definitions".
It lives in the asset's events instead: the fork's own materializations (`fork_state:
fork_materialized`) and the observations ("deferred to prod @ snapshot 7") that `dpone dev`, the
fork-state job and `fork_state_sensor` record (`dpone_dagster.integration.lake.observations`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dagster import AssetKey, AssetSpec
from dagster_dbt import DagsterDbtTranslator

from dpone_dagster.config import DEFAULT_LAKE, load_config
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.integration.lake.observations import LAKE_KIND
from dpone_dagster.lake.dbt_reads import table_of
from dpone_dagster.lake.resolution.naming import hash8

FORK_KIND = "fork"
WORKSPACE_TAG = "dpone/workspace"
_TABLE_NODES = frozenset({"model", "seed", "snapshot"})
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_TAG_MAX = 63


def tag_value(text: str) -> str:
    """`text` as a valid Dagster tag value (at most 63 of `[A-Za-z0-9_.-]`).

    An altered text ends in a hash of the original.
    """
    if len(text) <= _TAG_MAX and not _TAG_UNSAFE.search(text):
        return text
    return _TAG_UNSAFE.sub("_", text)[: _TAG_MAX - 9] + "-" + hash8(text)


class ForkAwareDbtTranslator(DagsterDbtTranslator):
    """`workspace` defaults to the configured one (`DPONE_WORKSPACE`), read when specs are built.

    Specs are memoized per (manifest, node, project, workspace), like dagster-dbt memoizes its own:
    dagster-dbt asks for a node's spec again for every child and every test of it, and each answer
    would otherwise be a fresh `merge_attributes`. Inside `resolved_workspace()` (the factory's
    spec build) the configured workspace is read once instead of once per call."""

    def __init__(self, lake: str = DEFAULT_LAKE, workspace: str | None = None, group_name: str | None = None) -> None:
        super().__init__()
        self.lake = lake
        self.workspace = workspace
        self.group_name = group_name
        self._resolved: str | None = None
        self._specs: dict[tuple[int, str, int, str], AssetSpec] = {}

    @contextmanager
    def resolved_workspace(self) -> Iterator[str]:
        """Read the configured workspace once for the specs built inside the block."""
        previous = getattr(self, "_resolved", None)
        self._resolved = self.workspace or load_config().workspace
        try:
            yield self._resolved
        finally:
            self._resolved = previous

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> AssetKey:
        if dbt_resource_props.get("resource_type") in _TABLE_NODES:
            return AssetKey([self.lake, *table_of(dbt_resource_props)])
        return super().get_asset_key(dbt_resource_props)

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return self.group_name or super().get_group_name(dbt_resource_props)

    def get_asset_spec(self, manifest: Mapping[str, Any], unique_id: str, project: Any) -> AssetSpec:
        # getattr/setdefault: a subclass that skips __init__ still works (dagster-dbt's memo does the same)
        workspace = self.workspace or getattr(self, "_resolved", None) or load_config().workspace
        memo = (id(manifest), unique_id, id(project), workspace)
        specs = self.__dict__.setdefault("_specs", {})
        found = specs.get(memo)
        if found is not None:
            return found
        spec = super().get_asset_spec(manifest, unique_id, project)
        if self.get_resource_props(manifest, unique_id).get("resource_type") in _TABLE_NODES:
            if workspace == ROOT_WORKSPACE:
                spec = spec.merge_attributes(kinds={LAKE_KIND})
            else:
                spec = spec.merge_attributes(kinds={LAKE_KIND, FORK_KIND}, tags={WORKSPACE_TAG: tag_value(workspace)})
        specs[memo] = spec
        return spec
