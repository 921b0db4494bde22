"""A dbt-duckdb plugin for the inner-loop baseline: offline extension loading and nothing else.

`bench_peers` compares dpone with plain `dbt build --defer --state`. The machines this runs on
cannot download DuckDB extensions, so the baseline profile needs `duck.configure` (load `ducklake`
from its wheel) before dbt-duckdb's own ATTACH entries run. What a reader could get wrong: this is
not a dpone plugin: no resolution, no defer views, no SQL guard; dbt-duckdb attaches the lakes
itself, exactly as a dbt user without dpone would.
"""

from __future__ import annotations

from dbt.adapters.duckdb.plugins import BasePlugin

from dpone_dagster.lake import duck


class Plugin(BasePlugin):
    def configure_connection(self, conn) -> None:
        duck.configure(conn)
