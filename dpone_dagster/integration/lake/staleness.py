"""The `fork_staleness` asset check: WARN when a fork reads or was built from data its owner has moved on from.

One check per DuckLake table asset (the `ducklake` kind, key `<lake>/<schema>/<table>`), all in one
`multi_asset_check` so a run reads each lake's staleness once (`lake/state/staleness.py`). A deferred
table fails the check when its owner materialized it after the fork's reference (the pin, or what
a live fork built from); a fork-materialized table fails it when one of its upstreams (the asset's
own deps, so dbt lineage) changed in its owner since the fork built it. Outside a fork, and for
tables concerned by neither, the check passes and says why.

What a reader could get wrong: the severity is WARN on purpose: staleness is information (repin,
rebuild, or accept), never a reason to block a run; the check is not blocking either. It opens the
ancestors' catalogs READ_ONLY for the snapshot counts; when one cannot be read the check still
answers from the control store and names the problem in its metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetsDefinition,
    MetadataValue,
    multi_asset_check,
)

from dpone_dagster.integration.binding import IN_PROCESS_ALONE_TAG
from dpone_dagster.integration.lake.observations import LAKE_KIND, lake_table
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.resolution.plan import TableName

if TYPE_CHECKING:  # the lake services load when a run uses them, never when a location loads
    from dpone_dagster.lake.state.staleness import LakeStaleness

CHECK_NAME = "fork_staleness"


def _metadata(values: Mapping[str, object]) -> dict[str, object]:
    return {k: v if not isinstance(v, str) else MetadataValue.text(v) for k, v in values.items() if v is not None}


def staleness_check_results(
    ducklake: DuckLakeResource,
    keys: Iterable[AssetKey],
    deps: Mapping[AssetKey, Iterable[AssetKey]] | None = None,
    *,
    catalog: bool = True,
) -> list[AssetCheckResult]:
    """One WARN-severity result per key (`passed=False` when stale), one staleness read per lake."""
    tables: dict[AssetKey, tuple[str, TableName]] = {k: t for k in keys if (t := lake_table(k)) is not None}
    deps = deps or {}
    from dpone_dagster.lake.state.staleness import lake_staleness

    reports: dict[str, LakeStaleness] = {}
    for lake in sorted({lake for lake, _ in tables.values()}):
        upstreams: dict[TableName, list[TableName]] = {}
        for key, (owner_lake, table) in tables.items():
            if owner_lake != lake:
                continue
            named = (lake_table(d) for d in deps.get(key, ()))
            upstreams[table] = [t[1] for t in named if t is not None and t[0] == lake]
        reports[lake] = lake_staleness(ducklake.workspace_id, lake, catalog=catalog, upstreams=upstreams)
    results = []
    for key, (lake, table) in sorted(tables.items(), key=lambda item: str(item[0])):
        report = reports[lake]
        found = report.table_metadata(table)
        stale = bool(found.get("stale"))
        if not report.fork_mode:
            description = f"workspace {report.workspace_id!r} is not a fork of lake {lake!r}: nothing is deferred"
        elif not found:
            description = f"{table} is neither deferred nor built in this fork"
        elif stale:
            description = f"{table} is stale in fork {report.workspace_id!r}: " + (
                f"changed upstreams {found['changed_upstreams']}"
                if "changed_upstreams" in found
                else f"its owner {found['owner']!r} materialized it after the fork's reference snapshot"
            )
        else:
            description = f"{table} is current with what the fork reads or built from"
        metadata = {"workspace": report.workspace_id, **found}
        if report.problems:
            metadata["problems"] = "; ".join(report.problems)
        results.append(
            AssetCheckResult(
                asset_key=key,
                check_name=CHECK_NAME,
                passed=not stale,
                severity=AssetCheckSeverity.WARN,
                description=description,
                metadata=_metadata(metadata),
            )
        )
    return results


def build_staleness_checks(assets: Iterable[AssetsDefinition], *, name: str = "fork_staleness_checks"):
    """The check over every DuckLake table asset of `assets` (their deps give each table's upstreams)."""
    specs = [spec for assets_def in assets for spec in assets_def.specs if LAKE_KIND in spec.kinds]
    deps = {spec.key: [d.asset_key for d in spec.deps] for spec in specs}

    @multi_asset_check(
        name=name,
        op_tags={IN_PROCESS_ALONE_TAG: "true"},  # a one-model run with its checks stays in process
        specs=[
            AssetCheckSpec(
                CHECK_NAME,
                asset=spec.key,
                description="In a fork: warns when this table's owner moved on since the fork's pin or "
                "build (deferred), or an upstream changed since the fork built it (fork-materialized).",
            )
            for spec in sorted(specs, key=lambda s: str(s.key))
        ],
        can_subset=True,
    )
    def fork_staleness_checks(context, ducklake: DuckLakeResource):
        selected: set[AssetCheckKey] = set(context.selected_asset_check_keys)
        keys = [k.asset_key for k in selected]
        yield from staleness_check_results(ducklake, keys, deps)

    return fork_staleness_checks
