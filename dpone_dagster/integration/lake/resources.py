"""`DuckLakeResource`: the fork-aware DuckLake for the current workspace, as a Dagster resource.

Assets ask it for a connection to a lake (`connect(lake, targets)`), write with plain SQL against
`resource.alias(lake)` (the connection also `USE`s it), and then call `record_materialization`,
whose return value is the asset's metadata: workspace, lake, table, namespace, `fork_state`,
snapshot id. The workspace is the deployment's (`DPONE_WORKSPACE` / `dpone.yaml`, default `prod`):
the resource has no configurable field, so run config that names a workspace fails validation, and
its setup refuses a run tagged for another workspace (`workspace.not_this_deployment`) before any
lake is attached (see `dpone_dagster.integration.binding`).

What a reader could get wrong: `targets` must name every table the asset writes. In a fork a
target that is still a defer view is dropped right after the attach; a table written without being
named as a target stays a view and the write fails (`CREATE OR REPLACE TABLE` refuses to replace
a view) — loudly, never into the parent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

from dagster import ConfigurableResource, InitResourceContext, get_dagster_logger
from pydantic import PrivateAttr

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.integration.binding import WorkspaceNotThisDeploymentError, bind_run, deployment_workspace
from dpone_dagster.lake.resolution.naming import lake_alias

if TYPE_CHECKING:  # the lake services are imported when a run uses them, never when a location loads
    from dpone_dagster.lake.resolution.apply import ResolvedLake
    from dpone_dagster.lake.state.table_states import LakeTableStates


class DuckLakeResource(ConfigurableResource):
    """The fork-aware DuckLake of this deployment's workspace (DPONE_WORKSPACE, default prod).

    Every dbt table asset is written through it and recorded (fork_state, snapshot id); in a fork,
    a table the fork has not built reads its nearest ancestor's through a read-only view. It has
    no configuration: nothing a launch carries (run config, tags) selects another workspace."""

    _bound_workspace: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._bound_workspace = bind_run(context.instance, context.run)

    def _config(self) -> DponeConfig:
        return load_config()

    @property
    def workspace_id(self) -> str:
        """The deployment's workspace; in a run, the one `setup_for_execution` bound the run to."""
        return self._bound(deployment_workspace())

    def _bound(self, workspace: str) -> str:
        if self._bound_workspace is not None and self._bound_workspace != workspace:
            raise WorkspaceNotThisDeploymentError(
                f"this run was bound to workspace {self._bound_workspace!r}, but the process now acts "
                f"for {workspace!r}; refusing to attach any lake"
            )
        return workspace

    def alias(self, lake: str = "main") -> str:
        return lake_alias(lake)

    def resolve(
        self, lake: str = "main", targets: Sequence[str] = (), reads: Sequence[str] | None = None
    ) -> ResolvedLake:
        """`reads`: the tables the asset reads (a fork then defers only those; None = every table)."""
        from dpone_dagster.lake.resolution.seam import resolve

        return resolve(self.workspace_id, lake, config=self._config(), targets=targets, reads=reads)

    def table_states(self, lake: str = "main") -> LakeTableStates:
        """Every table's `fork_state` and snapshot id in this workspace's lake (control store only)."""
        from dpone_dagster.lake.state.table_states import lake_table_states

        return lake_table_states(self.workspace_id, lake, self._config())

    @contextmanager
    def connect(self, lake: str = "main", targets: Sequence[str] = (), reads: Sequence[str] | None = None) -> Iterator:
        from dpone_dagster.lake import duck
        from dpone_dagster.lake.guard.connection import GuardedConnection
        from dpone_dagster.lake.guard.statement import quote_ident
        from dpone_dagster.lake.resolution.seam import resolve

        config = self._config()
        # the deployment's workspace without `deployment_workspace()`'s confinement check: resolve()
        # makes that check itself for every fork (lake/resolution/fork.py), so the path makes it once
        workspace = self._bound(config.workspace)
        resolved = resolve(workspace, lake, config=config, targets=targets, reads=reads)
        conn, warnings = resolved.open(extensions=duck.DEFAULT_EXTENSIONS)  # closed there if apply fails
        try:
            for warning in warnings:
                get_dagster_logger().warning(warning)
            conn.execute(f"USE {quote_ident(resolved.alias)}")
            yield GuardedConnection.for_lake(conn, resolved)  # every user SQL text: sql_guard
        finally:
            conn.close()

    def record_materialization(
        self,
        conn,
        table: str,
        *,
        lake: str = "main",
        status: str = "materialized",
        partition: str | None = None,
        partition_by: str | None = None,
        physical: str | None = None,
    ) -> dict[str, object]:
        """Track one managed materialize (columns and snapshot read from `conn`); return metadata.

        `partition_by` names the partition column of a partitioned table; `physical` is the table
        actually written when it is not `table` (a fork's `<table>__fork`, see `lake/resolution/partitions.py`)."""
        from dpone_dagster.lake.resolution.pins import LIVE, PINNED, pins
        from dpone_dagster.lake.resolution.plan import TableName
        from dpone_dagster.lake.state.built_tables import record_built_table
        from dpone_dagster.lake.state.tracking import fork_namespace, fork_state

        name = TableName.parse(table)
        config = self._config()
        workspace = self.workspace_id
        built = record_built_table(
            conn,
            workspace=workspace,
            lake=lake,
            alias=lake_alias(lake),
            table=name,
            status=status,  # type: ignore[arg-type]
            config=config,
            partition=partition,
            partition_by=partition_by,
            physical=TableName.parse(physical) if physical else None,
        )
        snapshot_id, read = built.snapshot_id, built.built_from
        state = fork_state(workspace, lake, name.schema, name.table, config)
        metadata: dict[str, object] = {
            "workspace": workspace,
            "lake": lake,
            "table": str(name),
            "namespace": fork_namespace(workspace, lake, config) if state.state != "own" else "(root)",
            **state.as_metadata(),
        }
        # Always present, so the asset page's latest-value-per-key metadata never keeps an older
        # observation's `fork_owner: prod` next to this materialization's `fork_materialized`.
        metadata.setdefault("fork_owner", workspace)
        if snapshot_id is not None:
            metadata["snapshot_id"] = int(snapshot_id)
        if read is not None:
            metadata["defer_mode"] = PINNED if pins(config, workspace, lake) else LIVE
            metadata["built_from"] = ", ".join(f"{o}@{s}" for o, s in sorted(read.items())) or "no ancestor"
        return metadata


@cache
def ducklake_resource() -> DuckLakeResource:
    """The code location's one `ducklake` resource object.

    `Definitions.merge` accepts a resource key in several Definitions only when it is the same
    object, so the lake domain and every fork-aware dbt component hand over this one.
    """
    return DuckLakeResource()
