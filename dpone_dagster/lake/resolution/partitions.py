"""Per-partition defer: a fork that built some partitions of a table reads the rest from its parent.

A partitioned table declares its partition column (dbt: `meta: {dpone: {partition_by: <col>}}`),
and every managed materialize of one partition records that column with the partition key (the
`config` of its `materialized_partition` row, see `partition_config`). In a fork such a table is
written under a hidden name, `<table>__fork` (`fork_table`), and the table's own name is a view:

    (SELECT * FROM <fork>.<schema>.<table>__fork WHERE (CAST(<col> AS VARCHAR) IN (<fork keys>)))
    UNION ALL BY NAME
    (SELECT * FROM <owner>.<schema>.<table> WHERE ((<col> IS NULL) OR (CAST(<col> AS VARCHAR) NOT IN (<fork keys>))))

where the fork keys are the partitions whose latest status in the fork is `materialized`, and the
owner is the nearest ancestor that owns the table (a root's real table, or a fork ancestor's own
union view: ancestor aliases depend only on lake and workspace, so its view reads the same in every
descendant). Every partition value therefore comes from exactly one side: no duplicates, no gaps.

What a reader could get wrong:
- the partition key must equal the partition column's value cast to VARCHAR (a Dagster daily key
  `2024-01-05` and a DATE column): a key that maps to several column values is not supported;
- the view is keyed on *tracking*, not on the rows in `<table>__fork`: a partition the fork built
  empty still hides the parent's rows of that day, and one whose last run failed shows the parent's;
- DuckLake stores a view's reference to its own catalog as `{DUCKLAKE_CATALOG}` and re-renders the
  rest with DuckDB's parentheses, so `stored_sql` (what the defer plan compares with the live view)
  is written in that form; a mismatch would replace the view, a new fork snapshot, on every run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import quote_ident, sql_string
from dpone_dagster.lake.resolution.plan import TableName

FORK_TABLE_SUFFIX = "__fork"
"""The hidden name's suffix: a fork's own partitions of `t` live in the table `t__fork`."""
PARTITION_BY = "partition_by"
OWN_CATALOG = "{DUCKLAKE_CATALOG}"
"""How DuckLake stores a view's reference to the catalog the view itself lives in."""


class PartitionTrackingError(LakeError):
    code = "lake.partition_tracking_invalid"


@dataclass(frozen=True)
class OwnPartitions:
    """One partitioned table in one workspace: its partition column and the keys it built."""

    column: str
    keys: frozenset[str]


def partition_config(column: str | None) -> str | None:
    """The `config` a partition's tracking row carries (None for an unpartitioned materialize)."""
    if column is None:
        return None
    if not column or not isinstance(column, str):
        raise PartitionTrackingError("a partition column is a non-empty name")
    return json.dumps({PARTITION_BY: column}, sort_keys=True)


def partition_column(config: str | None) -> str | None:
    """The partition column a tracking row's `config` declares (None: unpartitioned or unreadable)."""
    if not config:
        return None
    try:
        value = json.loads(config).get(PARTITION_BY)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def fork_table(name: TableName) -> TableName:
    """Where a fork physically keeps its own partitions of `name`."""
    return TableName(name.schema, name.table + FORK_TABLE_SUFFIX)


def _in_list(keys: Sequence[str]) -> str:
    return ", ".join(sql_string(k) for k in keys)


@dataclass(frozen=True)
class PartitionView:
    """The union view at `name` in a fork that built some partitions of it.

    A `views.View`, like `plan.DeferView` (the defer plan compares and creates both). `owner_alias`
    is the nearest owning ancestor's attach, or the fork's own alias when no ancestor owns the table
    (then the view shows the fork's partitions only); `source` is the table read at the owner.
    """

    name: TableName
    owner_workspace: str
    owner_alias: str
    source: TableName
    own_alias: str
    column: str
    keys: tuple[str, ...]
    has_owner: bool = True
    current_only: bool = False
    replace: bool = False

    def _sql(self, own_catalog: str) -> str:
        col = quote_ident(self.column)
        parts = []
        if self.keys:
            own = fork_table(self.name)
            parts.append(
                f"SELECT * FROM {own_catalog}.{quote_ident(own.schema)}.{quote_ident(own.table)} "
                f"WHERE (CAST({col} AS VARCHAR) IN ({_in_list(self.keys)}))"
            )
        if self.has_owner:
            owner = self.source.qualified(self.owner_alias)
            where = (
                f" WHERE (({col} IS NULL) OR (CAST({col} AS VARCHAR) NOT IN ({_in_list(self.keys)})))"
                if self.keys
                else ""
            )
            parts.append(f"SELECT * FROM {owner}{where}")
        if not parts:
            raise PartitionTrackingError(f"{self.name} has neither fork partitions nor an owner to read")
        if len(parts) == 1:
            return parts[0]
        return " UNION ALL BY NAME ".join(f"({part})" for part in parts)

    def select_sql(self) -> str:
        return self._sql(quote_ident(self.own_alias))

    def stored_sql(self) -> str:
        """The view's SQL as DuckLake stores it (own catalog as `{DUCKLAKE_CATALOG}`)."""
        return self._sql(OWN_CATALOG)

    def create_sql(self, alias: str) -> str:
        verb = "CREATE OR REPLACE VIEW" if self.replace else "CREATE VIEW IF NOT EXISTS"
        return f"{verb} {self.name.qualified(alias)} AS {self.select_sql()}"


def partition_views(
    own: Mapping[TableName, OwnPartitions],
    owners: Mapping[TableName, tuple[str, str | None]],
    own_alias: str,
) -> list[PartitionView]:
    """A union view per table the fork materialized by partition.

    `owners` maps a table to (nearest owning ancestor, its attach alias or None when that ancestor
    cannot be attached in this run); a table no ancestor owns reads the fork's partitions only.
    An owner that cannot be attached leaves the table out (it reads as absent, like a plain defer)."""
    views = []
    for name, mine in sorted(own.items()):
        owner = owners.get(name)
        if owner is not None and owner[1] is None:
            continue
        if owner is None and not mine.keys:
            continue
        views.append(
            PartitionView(
                name=name,
                owner_workspace=owner[0] if owner else "",
                owner_alias=owner[1] if owner else own_alias,  # type: ignore[index]
                source=name,
                own_alias=own_alias,
                column=mine.column,
                keys=tuple(sorted(mine.keys)),
                has_owner=owner is not None,
            )
        )
    return views
