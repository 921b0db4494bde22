"""How dbt_project_synthetic's nodes appear in Dagster: keys `<lake>/<schema>/<table>`, kinds, fork tags.

A dbt model, seed or snapshot is one DuckLake table, so its asset key names that table the way the
rest of dpone-dagster does (lake, schema, table): `main/marts/fct_orders`. All of them are in the
`synthetic_dbt` group and carry the `ducklake` kind; dbt tests become asset checks on those keys
(dagster-dbt's default). When the code location loads for any workspace other than `prod`, each
table also gets its fork state as the tag `dpone/fork_state` (deferred, fork_materialized, absent,
or own for a lake the fork shares), the owning ancestor of a deferred table as `dpone/fork_owner`,
and the state as a kind, so the graph node itself shows it. All of it comes from one batched read
of the control store (`lake_table_states`), made the first time a spec is asked for.

What a reader could get wrong: the key uses the dbt *alias* (the relation name in the lake), not
the node name, and the lake name (`main`), not the DuckDB alias it is attached under (`lake_main`).
The tags are a picture taken when the definitions loaded: they change on "Reload definitions",
not when a run finishes (materialization metadata and the fork sensor are live). If the state
cannot be read at load (unknown workspace, control store down), the tag says `unknown` and
`dpone/fork_state_error` carries the error code, rather than failing the whole code location.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from dagster import AssetKey, AssetSpec
from dagster_dbt import DagsterDbtTranslator

from dpone_dagster.config import DEFAULT_LAKE, load_config
from dpone_dagster.defs.lake.observations import LAKE_KIND
from dpone_dagster.errors import DponeError
from dpone_dagster.lake.naming import hash8
from dpone_dagster.lake.resolve import TableName
from dpone_dagster.lake.table_states import LakeTableStates, lake_table_states
from dpone_dagster.workspaces.ids import ROOT_WORKSPACE

log = logging.getLogger(__name__)

GROUP_NAME = "synthetic_dbt"
FORK_STATE_TAG = "dpone/fork_state"
FORK_OWNER_TAG = "dpone/fork_owner"
FORK_STATE_ERROR_TAG = "dpone/fork_state_error"
UNKNOWN_STATE = "unknown"
UNREADABLE_CODE = "lake.fork_state_unreadable"
_TABLE_NODES = frozenset({"model", "seed", "snapshot"})
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_TAG_MAX = 63


def table_of(dbt_resource_props: Mapping[str, Any]) -> tuple[str, str]:
    """(schema, table) of the relation a dbt node builds."""
    return dbt_resource_props["schema"], dbt_resource_props.get("alias") or dbt_resource_props["name"]


def tag_value(text: str) -> str:
    """`text` as a valid Dagster tag value (at most 63 of `[A-Za-z0-9_.-]`); an altered text ends in a hash of the original."""
    if len(text) <= _TAG_MAX and not _TAG_UNSAFE.search(text):
        return text
    return _TAG_UNSAFE.sub("_", text)[: _TAG_MAX - 9] + "-" + hash8(text)


def fork_state_tags(states: LakeTableStates, table: TableName) -> dict[str, str]:
    state = states.of(table).state
    tags = {FORK_STATE_TAG: state.state}
    if state.owner is not None:
        tags[FORK_OWNER_TAG] = tag_value(state.owner)
    return tags


class SyntheticDbtTranslator(DagsterDbtTranslator):
    """`workspace` defaults to the configured one (`DPONE_WORKSPACE`), read when specs are built."""

    def __init__(self, lake: str = DEFAULT_LAKE, workspace: str | None = None) -> None:
        super().__init__()
        self.lake = lake
        self.workspace = workspace
        self._states_loaded = False
        self._states: LakeTableStates | None = None
        self._state_error: str | None = None

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> AssetKey:
        if dbt_resource_props.get("resource_type") in _TABLE_NODES:
            return AssetKey([self.lake, *table_of(dbt_resource_props)])
        return super().get_asset_key(dbt_resource_props)

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str:
        return GROUP_NAME

    def get_asset_spec(self, manifest: Mapping[str, Any], unique_id: str, project: Any) -> AssetSpec:
        spec = super().get_asset_spec(manifest, unique_id, project)
        props = self.get_resource_props(manifest, unique_id)
        if props.get("resource_type") not in _TABLE_NODES:
            return spec
        tags = self.fork_tags(TableName(*table_of(props)))
        kinds = {LAKE_KIND}
        if tags.get(FORK_STATE_TAG) not in (None, "own", UNKNOWN_STATE):
            kinds.add(tags[FORK_STATE_TAG])
        return spec.merge_attributes(kinds=kinds, tags=tags)

    def fork_tags(self, table: TableName) -> dict[str, str]:
        """Fork tags of one table in this translator's workspace (none in `prod`)."""
        self._load_states()
        if self._state_error is not None:
            return {FORK_STATE_TAG: UNKNOWN_STATE, FORK_STATE_ERROR_TAG: self._state_error}
        if self._states is None:
            return {}
        return fork_state_tags(self._states, table)

    def _load_states(self) -> None:
        if self._states_loaded:
            return
        self._states_loaded = True
        workspace = self.workspace or load_config().workspace
        if workspace == ROOT_WORKSPACE:
            return
        try:
            self._states = lake_table_states(workspace, self.lake)
        except DponeError as exc:
            log.warning("fork state of workspace %r could not be read at load: %s", workspace, exc)
            self._state_error = tag_value(exc.code)
        except Exception as exc:
            log.warning("fork state of workspace %r could not be read at load (%s)", workspace, type(exc).__name__)
            self._state_error = UNREADABLE_CODE
