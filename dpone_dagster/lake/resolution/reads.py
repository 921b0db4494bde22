"""Read sets: the tables a job reads, so a fork creates defer views only for those.

A fork job's resolution can be given `reads` (the relations its selection reads: dbt's graph for dbt
runs, the declared inputs of other assets). Then only defer views named in `reads` are created or
re-pointed; every other upstream table keeps whatever the fork catalog has (a view made by an
earlier job, or nothing) and gets its view from the first later job that reads it.

What a reader could get wrong:
- `None` and `()` are different: `None` (no read set: `dpone lake sql`, tests, tools) means *every*
  table the ancestors own, as before read sets existed; `()` means "reads nothing upstream" (the
  metadata connection after a dbt run, which only reads the tables it just wrote).
- a read set never drops anything: a live defer view outside the set is left alone even when it is
  stale (its owner changed), because another run reading it may be using it; it is re-pointed by
  the next resolution that reads it.
- a read set also bounds what resolution reads from the control store: tracking rows of the read
  tables (and of the tables an SCD2 companion reads) only, filtered in SQL (`tracked_for`), so the
  plan costs rows in proportion to the read set, not to the tables the ancestors own.
- the set names *views*: an SCD2 `<table>_current` companion is created only when the job reads
  `<table>_current` itself; per-partition union views (`lake/resolution/partitions.py`) are never filtered.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.resolution.plan import TableName, parse_targets
from dpone_dagster.lake.resolution.views import View

READS_ENV = "DPONE_DBT_READS"
"""The dbt plugin's read set: comma-separated `schema.table`; unset = every table (no read set)."""

ReadSet = frozenset[TableName] | None


def parse_reads(reads: Sequence[str] | None) -> ReadSet:
    """`None` stays `None` (every table); otherwise the set of parsed table names."""
    if reads is None:
        return None
    return frozenset(parse_targets(tuple(reads)))


def keep_read(views: Iterable[View], reads: ReadSet) -> list[View]:
    """The defer views a job with read set `reads` needs (all of them without a read set)."""
    views = list(views)
    if reads is None:
        return views
    return [view for view in views if view.name in reads]


def tracked_for(reads: ReadSet, companion_suffix: str) -> frozenset[TableName] | None:
    """The tables whose tracking rows a job with read set `reads` needs: each read name, and the
    table an SCD2 companion (`<table><companion_suffix>`) reads from; None without a read set."""
    if reads is None:
        return None
    sources = {
        TableName(name.schema, name.table.removesuffix(companion_suffix))
        for name in reads
        if name.table.endswith(companion_suffix) and name.table != companion_suffix
    }
    return frozenset(reads) | sources


def reads_to_env(reads: Iterable[str]) -> str:
    """The `DPONE_DBT_READS` value for a read set (sorted, comma-separated)."""
    out = sorted(set(reads))
    for name in out:
        if "," in name:
            raise LakeError(f"a table name in a read set cannot contain a comma: {name!r}", code="lake.invalid_read")
    return ",".join(out)


def reads_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
    """The read set the dbt plugin was handed; `None` when the variable is unset (every table)."""
    raw = (os.environ if environ is None else environ).get(READS_ENV)
    if raw is None:
        return None
    return tuple(part for part in (p.strip() for p in raw.split(",")) if part)
