"""What a Dagster dbt op hands the dpone dbt plugin through the dbt process's environment.

The op (`integration/dbt/run.py`) sets these variables around the dbt subprocess it starts; the
plugin (`lake/dbt_plugin.py`), inside dbt, reads them. They live here, apart from the plugin, so the
Dagster process that only *sets* them never imports dbt-duckdb's adapter (a quarter of a second a run).

What a reader could get wrong: the read set's own variable (`DPONE_DBT_READS`) is in
`lake/resolution/reads.py` with the read-set rules; the targets are the tables this dbt run may write,
order-insensitive, and a name with a comma is refused rather than split.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from dpone_dagster.errors import LakeError

TARGETS_ENV = "DPONE_DBT_TARGETS"
READS_FROM_INVOCATION_ENV = "DPONE_DBT_READS_FROM_INVOCATION"
"""`1`: the read set comes from this dbt invocation's own manifest (`invocation_reads`), not `DPONE_DBT_READS`."""


def targets_to_env(targets: Sequence[str]) -> str:
    """The `DPONE_DBT_TARGETS` value for a list of `schema.table` names (order-insensitive)."""
    for target in targets:
        if "," in target:
            raise LakeError(f"a dbt target name cannot contain a comma: {target!r}")
    return ",".join(sorted(set(targets)))


def targets_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    raw = (os.environ if environ is None else environ).get(TARGETS_ENV, "")
    return tuple(part for part in (p.strip() for p in raw.split(",")) if part)
