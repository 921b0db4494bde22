"""Fork state as Dagster `AssetObservation`s, for every DuckLake table asset of the code location.

A DuckLake table asset is one whose spec carries the `ducklake` kind and whose key is
`<lake>/<schema>/<table>` (the dbt translator's convention). `fork_state_observations` reads each
lake's states once (`DuckLakeResource.table_states`, one batched control-store pass per lake) and
returns one observation per asset, with the same metadata keys a materialization carries:
workspace, lake, table, namespace, fork_state, fork_owner (deferred only), snapshot_id (when known).

What a reader could get wrong: the assets are found in the code location the job or sensor runs in
(`context.repository_def`: any asset with the `ducklake` kind, from any dbt project or any other
asset factory alike), never by importing asset definitions: the lake's jobs and sensor are shared by
every dbt project of a location (`integration/lake/definitions.py`) and know none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagster import AssetKey, AssetObservation, RepositoryDefinition
from dagster._check import CheckError

from dpone_dagster.errors import LakeError
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.resolution.plan import TableName

if TYPE_CHECKING:  # the lake services load when a run uses them, never when a location loads
    from dpone_dagster.lake.state.table_states import LakeTableStates

LAKE_KIND = "ducklake"

AssetKeys = Callable[[], Iterable[AssetKey]]


class DuckLakeAssetsUnknownError(LakeError):
    code = "lake.ducklake_assets_unknown"


def ducklake_asset_keys(repository_def: RepositoryDefinition | None) -> list[AssetKey]:
    """Keys of a code location's DuckLake table assets: every asset carrying the `ducklake` kind."""
    if repository_def is None:
        raise DuckLakeAssetsUnknownError(
            "no code location is known here, so its DuckLake assets cannot be listed; pass the asset keys"
        )
    return sorted((n.key for n in repository_def.asset_graph.asset_nodes if LAKE_KIND in n.kinds), key=str)


def location_asset_keys(context: Any) -> list[AssetKey]:
    """`ducklake_asset_keys` of the code location an op or sensor `context` runs in."""
    try:
        repository_def = context.repository_def
    except CheckError:  # an op run outside a code location (execute_in_process of a bare job)
        repository_def = None
    return ducklake_asset_keys(repository_def)


def lake_table(key: AssetKey) -> tuple[str, TableName] | None:
    """(lake, table) named by a `<lake>/<schema>/<table>` key; None for any other shape."""
    if len(key.path) != 3:
        return None
    return key.path[0], TableName(key.path[1], key.path[2])


@dataclass(frozen=True)
class ForkStateReport:
    """Per lake, the states read; per asset, its observation."""

    states: dict[str, LakeTableStates]
    observations: list[AssetObservation]

    @property
    def fork_lakes(self) -> list[LakeTableStates]:
        return [s for s in self.states.values() if s.fork_mode]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for event in self.observations:
            state = str(event.metadata["fork_state"].value)
            out[state] = out.get(state, 0) + 1
        return dict(sorted(out.items()))


def fork_state_observations(ducklake: DuckLakeResource, keys: Sequence[AssetKey]) -> ForkStateReport:
    tables: dict[AssetKey, tuple[str, TableName]] = {}
    for key in keys:
        named = lake_table(key)
        if named is not None:
            tables[key] = named
    states = {lake: ducklake.table_states(lake) for lake in sorted({lake for lake, _ in tables.values()})}
    observations = []
    for key, (lake, table) in tables.items():
        metadata = states[lake].metadata(table)
        # every event carries the key (see DuckLakeResource.record_materialization): who owns what is read
        metadata.setdefault("fork_owner", metadata["workspace"] if metadata["fork_state"] != "absent" else "none")
        observations.append(
            AssetObservation(asset_key=key, description=fork_state_summary(metadata), metadata=metadata)
        )
    return ForkStateReport(states, observations)


def fork_state_summary(metadata: Mapping[str, object]) -> str:
    """One line for an observation's description: "deferred to prod @ snapshot 7", "materialized in fork …"."""
    state = metadata.get("fork_state")
    snapshot = f" @ snapshot {metadata['snapshot_id']}" if metadata.get("snapshot_id") is not None else ""
    if state == "deferred":
        return f"deferred to {metadata.get('fork_owner')}{snapshot}"
    if state == "fork_materialized":
        return f"materialized in fork {metadata.get('workspace')}{snapshot}"
    if state == "absent":
        return f"absent: no workspace up the chain of {metadata.get('workspace')} has built it"
    return f"{state} table of workspace {metadata.get('workspace')}{snapshot}"


def record_fork_state(instance: Any, ducklake: DuckLakeResource, keys: Sequence[AssetKey]) -> ForkStateReport:
    """Report the observations into `instance` outside any run (what `dpone dev` does at start in a fork).

    In a workspace that is not a fork of any of the assets' lakes nothing is recorded: every table is its own."""
    report = fork_state_observations(ducklake, keys)
    if report.fork_lakes:
        for observation in report.observations:
            instance.report_runless_asset_event(observation)
    return report
