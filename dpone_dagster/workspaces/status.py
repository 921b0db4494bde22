"""`workspace_status`: per lake, how a workspace attaches it and the `fork_state` of every table.

Read-only: it computes names and paths the same way resolution does, but opens no catalog and
registers nothing, so it is safe to run against a fork whose catalog is down.

What a reader could get wrong: the table list is every table *tracked* anywhere in the chain;
untracked tables (raw SQL writes) are not listed, exactly as they are not deferred.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.resolution.attach import absolute_data_path
from dpone_dagster.lake.resolution.fork import physical_lake
from dpone_dagster.lake.resolution.naming import fork_metadata_schema
from dpone_dagster.lake.state.tracking import state_in_chain, workspace_lake_view


@dataclass(frozen=True)
class TableStatus:
    table: str
    fork_state: str
    owner: str | None
    partitions: list[str] = field(default_factory=list)
    """In a fork: the partitions of a partitioned table the fork built itself (the rest read its owner's)."""


@dataclass(frozen=True)
class LakeStatus:
    lake: str
    mode: str  # root, isolated, shared
    namespace: str
    data_path: str
    tables: list[TableStatus]
    problem: str | None = None


@dataclass(frozen=True)
class WorkspaceStatus:
    workspace_id: str
    parent_id: str | None
    chain: list[str]
    lakes: list[LakeStatus]

    def as_dict(self) -> dict:
        return asdict(self)


def _lake_status(workspace_id: str, lake: str, config: DponeConfig) -> tuple[LakeStatus, list[str]]:
    view = workspace_lake_view(workspace_id, lake, config)
    own = view.settings[workspace_id]
    mode = "isolated" if view.fork_mode else ("shared" if own.shared else "root")
    namespace, problem = "", None
    data_path = absolute_data_path(own.settings.data_path, config.project_root)
    if view.fork_mode:
        try:
            me = physical_lake(workspace_id, own.settings, config, is_fork=True, incarnation=view.incarnation)
            data_path = me.data_path
            namespace = fork_metadata_schema(workspace_id, lake, view.incarnation)
        except LakeError as exc:
            problem = exc.code
    names = sorted({name for ws in view.chain_ids for name in view.tracking.of(ws)})
    tables = []
    for name in names:
        state = state_in_chain(view.chain_ids, view.tracking, name, fork_mode=view.fork_mode)
        own = view.partitions.get(name) if view.fork_mode else None
        tables.append(TableStatus(str(name), state.state, state.owner, sorted(own.keys) if own else []))
    return LakeStatus(lake, mode, namespace, data_path, tables, problem), view.chain_ids


def workspace_status(workspace_id: str, config: DponeConfig | None = None) -> WorkspaceStatus:
    config = config or load_config()
    lakes, chain = [], [workspace_id]
    for lake in config.all_lakes:
        status, chain = _lake_status(workspace_id, lake.name, config)
        lakes.append(status)
    parent = chain[1] if len(chain) > 1 else None
    return WorkspaceStatus(workspace_id, parent, chain, lakes)
