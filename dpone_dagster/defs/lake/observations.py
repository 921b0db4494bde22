"""Fork state as Dagster `AssetObservation`s, for every DuckLake table asset of the code location.

A DuckLake table asset is one whose spec carries the `ducklake` kind and whose key is
`<lake>/<schema>/<table>` (the dbt translator's convention). `fork_state_observations` reads each
lake's states once (`DuckLakeResource.table_states`, one batched control-store pass per lake) and
returns one observation per asset, with the same metadata keys a materialization carries:
workspace, lake, table, namespace, fork_state, fork_owner (deferred only), snapshot_id (when known).

What a reader could get wrong: the assets are found through the dbt definitions, imported when
first asked for, not when this module is imported: the dbt assets import this package (for
`DuckLakeResource`), so importing them eagerly here would be circular.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dagster import AssetKey, AssetObservation

from dpone_dagster.defs.lake.resources import DuckLakeResource
from dpone_dagster.lake.resolve import TableName
from dpone_dagster.lake.table_states import LakeTableStates

LAKE_KIND = "ducklake"

AssetKeys = Callable[[], Iterable[AssetKey]]


def ducklake_asset_keys() -> list[AssetKey]:
    """Keys of the code location's DuckLake table assets (the dbt models, seeds and snapshots)."""
    from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets

    return sorted((spec.key for spec in synthetic_dbt_assets.specs if LAKE_KIND in spec.kinds), key=str)


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
    observations = [
        AssetObservation(asset_key=key, metadata=states[lake].metadata(table)) for key, (lake, table) in tables.items()
    ]
    return ForkStateReport(states, observations)
