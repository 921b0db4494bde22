"""The one seam that turns (workspace, lake) into the DuckLake ATTACH statements a job runs.

Every DuckLake access in the project — dbt (through the dbt-duckdb plugin), the `DuckLakeResource`,
`dpone lake sql`, tests and benchmarks — gets its attach from `resolve()`. For the root workspace
(`prod`) and for lakes a fork shares with its parent, that is the lake's own configuration. For an
isolated fork it is the fork's own namespace (write redirect), its ancestors attached READ_ONLY, and
defer views for the upstream tables the fork has not materialized itself: every such table, or
only those a job reads when it passes `reads=` (see `fork.py`, `reads.py`).

What a reader could get wrong: `alias` is not the lake name. DuckDB reserves `main` (the default
lake's name) as a catalog alias, so every lake is attached as `lake_<name>` (`lake_main`), in the
root and in every fork alike; user SQL and dbt address tables as `<alias>.<schema>.<table>`.
The plan types live below this module (`plan.py`: table names and defer views; `apply.py`:
`ResolvedLake`); import them from there.
"""

from __future__ import annotations

from collections.abc import Sequence

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE, check_workspace_id
from dpone_dagster.lake.resolution.apply import ResolvedLake, root_resolution
from dpone_dagster.lake.resolution.fork import resolve_workspace_lake
from dpone_dagster.lake.resolution.plan import parse_targets
from dpone_dagster.lake.resolution.reads import parse_reads
from dpone_dagster.lake.state.usage import touch_last_used


def resolve(
    workspace_id: str,
    lake: str = "main",
    *,
    config: DponeConfig | None = None,
    targets: Sequence[str] = (),
    reads: Sequence[str] | None = None,
) -> ResolvedLake:
    """Resolve how `workspace_id` attaches `lake`; `targets` are the tables the job will write,
    `reads` the tables it reads (a fork then defers only those; None = every table, see `reads.py`)."""
    config = config or load_config()
    check_workspace_id(workspace_id)
    wanted = parse_targets(targets)
    read_set = parse_reads(reads)
    if workspace_id == ROOT_WORKSPACE:
        return root_resolution(workspace_id, config.lake(lake), config, wanted)
    resolved = resolve_workspace_lake(workspace_id, lake, config, wanted, reads=read_set)
    touch_last_used(workspace_id, config)  # the TTL janitor's idle clock (at most one write a minute)
    return resolved
