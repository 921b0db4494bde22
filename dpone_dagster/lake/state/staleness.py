"""Staleness of a fork: how far its ancestors have moved on from what the fork reads or built from.

For every **deferred** table (read through a defer view from owner O):
- the *reference* snapshot of O: the fork's pin of O (pinned defer), or, in a live fork, the
  oldest snapshot of O that a table the fork materialized was built from (the fork's own data is
  as old as that); a live fork that built nothing from O has no reference: it reads O as it is;
- `table_changed`: O's latest managed materialize of the table is newer than the reference;
- with `catalog=True` (the ancestors' catalogs are opened READ_ONLY): `snapshots_behind` (O's
  current snapshot minus the reference; DuckLake numbers snapshots consecutively) and how long O
  has moved on (`behind_since`: the time of O's first snapshot after the reference).
For every **fork-materialized** table: `upstream_changed` when a deferred table of an owner it was
built from (`lake/resolution/pins.py` `built_from`) has a managed materialize newer than that build read;
`upstreams` (table -> the tables it reads, e.g. dbt lineage) narrows this to the tables it reads.

What a reader could get wrong: table-level changes come from the control store's tracking (one
batched pass, no catalog): a raw-SQL write to an ancestor table (untracked) moves `snapshots_behind`
but not `table_changed` — exactly as such a table is not deferred in the first place. Staleness
only reports; it never re-pins, rebuilds or refuses anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.errors import DponeError
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.pins import LIVE, PINNED, all_built_from, pins, read_ancestors
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.table_states import LakeTableStates, lake_table_states


@dataclass(frozen=True)
class DeferredStaleness:
    table: str
    owner: str
    reference_snapshot: int | None
    owner_table_snapshot: int | None
    table_changed: bool
    owner_snapshot: int | None = None
    snapshots_behind: int | None = None
    behind_since: str | None = None
    behind_seconds: float | None = None


@dataclass(frozen=True)
class BuiltStaleness:
    table: str
    built_from: dict[str, int]
    changed_upstreams: tuple[str, ...] = ()

    @property
    def upstream_changed(self) -> bool:
        return bool(self.changed_upstreams)


@dataclass(frozen=True)
class LakeStaleness:
    workspace_id: str
    lake: str
    fork_mode: bool
    mode: str  # pinned, live (fork lakes) or own (root, shared)
    pins: dict[str, int] = field(default_factory=dict)
    deferred: tuple[DeferredStaleness, ...] = ()
    built: tuple[BuiltStaleness, ...] = ()
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        out = asdict(self)
        out["built"] = [{**asdict(b), "upstream_changed": b.upstream_changed} for b in self.built]
        return out

    @property
    def stale_deferred(self) -> list[DeferredStaleness]:
        return [d for d in self.deferred if d.table_changed]

    @property
    def stale_built(self) -> list[BuiltStaleness]:
        return [b for b in self.built if b.upstream_changed]

    def summary(self) -> str:
        if not self.fork_mode:
            return f"lake {self.lake}: not a fork, nothing deferred"
        return (
            f"lake {self.lake} ({self.mode}): {len(self.stale_deferred)} of {len(self.deferred)} deferred "
            f"table(s) changed in their owner since the fork's reference, {len(self.stale_built)} of "
            f"{len(self.built)} fork-built table(s) built from an upstream that changed since"
        )

    def table_metadata(self, table: TableName) -> dict[str, object]:
        """Flat metadata for one table (asset checks, observations); {} for a table not concerned."""
        name = str(table)
        for d in self.deferred:
            if d.table == name:
                out: dict[str, object] = {
                    "defer_mode": self.mode,
                    "stale": d.table_changed,
                    "owner": d.owner,
                    "owner_table_snapshot": d.owner_table_snapshot,
                }
                if d.reference_snapshot is not None:
                    out["reference_snapshot"] = d.reference_snapshot
                if d.snapshots_behind is not None:
                    out["snapshots_behind"] = d.snapshots_behind
                if d.behind_seconds is not None:
                    out["behind_seconds"] = round(d.behind_seconds, 3)
                return out
        for b in self.built:
            if b.table == name:
                return {
                    "defer_mode": self.mode,
                    "stale": b.upstream_changed,
                    "built_from": ", ".join(f"{o}@{s}" for o, s in sorted(b.built_from.items())),
                    "changed_upstreams": ", ".join(b.changed_upstreams) or "none",
                }
        return {}


def _latest_owner_writes(states: LakeTableStates) -> dict[tuple[str, TableName], int]:
    out: dict[tuple[str, TableName], int] = {}
    for row in states.ancestor_rows:
        if row.status == "materialized" and row.snapshot_id is not None:
            key = (row.workspace_id, row.table)
            out[key] = max(out.get(key, row.snapshot_id), row.snapshot_id)
    return out


def _parse_time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def lake_staleness(
    workspace_id: str,
    lake: str = "main",
    config: DponeConfig | None = None,
    *,
    catalog: bool = True,
    upstreams: Mapping[TableName, Iterable[TableName]] | None = None,
    clock: Clock = utc_now,
) -> LakeStaleness:
    """Staleness of every deferred and every fork-materialized table of one fork lake."""
    config = config or load_config()
    states = lake_table_states(workspace_id, lake, config)
    if not states.fork_mode:
        return LakeStaleness(workspace_id, lake, False, "own")
    pinned = pins(config, workspace_id, lake)
    built = all_built_from(config, workspace_id, lake)
    writes = _latest_owner_writes(states)
    own_tables = {t for t, s in states.tables.items() if s.state.state == "fork_materialized"}
    deferred = {t: s.state.owner for t, s in states.tables.items() if s.state.state == "deferred" and s.state.owner}

    reference: dict[str, int] = dict(pinned)
    if not pinned:
        for table in own_tables:
            for owner, snapshot in built.get(table, {}).items():
                reference[owner] = min(reference.get(owner, snapshot), snapshot)

    found, unread = None, ()
    if catalog and deferred:
        try:
            found = read_ancestors(workspace_id, lake, config)
        except DponeError as exc:  # e.g. fork roles missing: answer from the control store alone
            unread = (f"the ancestors of lake {lake!r} could not be attached ({exc.code})",)
    now = clock()
    rows: list[DeferredStaleness] = []
    for table, owner in sorted(deferred.items()):
        ref = reference.get(owner)
        written = writes.get((owner, table))
        changed = ref is not None and written is not None and written > ref
        current = behind = since = seconds = None
        if found is not None and owner in found.snapshots:
            current = found.snapshots[owner]
            behind = 0 if ref is None else max(current - ref, 0)
            later = [t for i, t in found.times.get(owner, []) if ref is not None and i > ref]
            first = _parse_time(later[0]) if later else None
            if first is not None:
                since = first.isoformat()
                seconds = max((now - first).total_seconds(), 0.0) if first.tzinfo else None
        rows.append(DeferredStaleness(str(table), owner, ref, written, changed, current, behind, since, seconds))

    built_rows: list[BuiltStaleness] = []
    for table in sorted(own_tables):
        read = built.get(table, {})
        wanted = None if upstreams is None else set(upstreams.get(table, ()))
        changed = tuple(
            f"{owner}:{up}@{writes[(owner, up)]}"
            for up, owner in sorted(deferred.items())
            if owner in read
            and (wanted is None or up in wanted)
            and writes.get((owner, up)) is not None
            and writes[(owner, up)] > read[owner]
        )
        built_rows.append(BuiltStaleness(str(table), read, changed))
    problems = found.problems if found is not None else unread
    return LakeStaleness(
        workspace_id, lake, True, PINNED if pinned else LIVE, pinned, tuple(rows), tuple(built_rows), tuple(problems)
    )


def workspace_staleness(
    workspace_id: str, config: DponeConfig | None = None, *, catalog: bool = True, clock: Clock = utc_now
) -> list[LakeStaleness]:
    config = config or load_config()
    return [lake_staleness(workspace_id, each.name, config, catalog=catalog, clock=clock) for each in config.all_lakes]
