"""Who owns each table up a fork's chain: the tracked tables per workspace, and the nearest owner.

Plan values, no I/O: `lake/state/tracking.py` reads the rows (one query for the whole chain) into a
`ChainTracking`; the fork builder (`fork.py`), the table states and the diff read it from here.

What a reader could get wrong: only tracked tables are owned. An ancestor's table whose every
recorded partition last *failed* is not owned there, and a fork's own row of any status stops
deferral of that table; an entry marked `missing` still names its owner (the table is missing there
and is not silently read from a farther ancestor).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from dpone_dagster.lake.resolution.plan import SCD2_MARKER, TableName


@dataclass(frozen=True)
class TrackedTable:
    """`columns_json` is the captured schema as stored: parsed only when it can mark SCD2."""

    materialized: bool = False
    columns_json: str | None = None
    missing: bool = False

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        return tuple((n, t) for n, t in json.loads(self.columns_json)) if self.columns_json else ()

    @property
    def is_scd2(self) -> bool:
        if not self.columns_json or SCD2_MARKER not in self.columns_json.lower():
            return False
        return any(name.lower() == SCD2_MARKER for name, _ in self.columns)


@dataclass
class ChainTracking:
    """Tracked tables per workspace of a chain (only workspaces with rows appear)."""

    tables: dict[str, dict[TableName, TrackedTable]] = field(default_factory=dict)

    def of(self, workspace_id: str) -> dict[TableName, TrackedTable]:
        return self.tables.get(workspace_id, {})


def nearest_owners(chain_ids: Sequence[str], tracking: ChainTracking) -> dict[TableName, tuple[int, TrackedTable]]:
    """For each table not tracked by `chain_ids[0]`: (index of the nearest owning ancestor, entry).

    An entry marked `missing` still names its owner (the table is missing there, and is not
    silently read from a farther ancestor)."""
    own = set(tracking.of(chain_ids[0]))
    owners: dict[TableName, tuple[int, TrackedTable]] = {}
    for index, ws in enumerate(chain_ids[1:], start=1):
        for name, entry in tracking.of(ws).items():
            if (entry.materialized or entry.missing) and name not in own and name not in owners:
                owners[name] = (index, entry)
    return owners
