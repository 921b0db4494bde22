"""The dpone dbt-duckdb plugin minus its SQL guard: attaches the configured workspace's lake, nothing else.

Test-only (tests/confinement/test_dbt_doors.py): it shows what reaches DuckDB from dbt when a door is
missing from the guard, so that the kernel confinement is what the tests prove.
"""

from dbt.adapters.duckdb.plugins import BasePlugin

from dpone_dagster.lake import duck
from dpone_dagster.lake.dbt_plugin import resolve_for_dbt


class Plugin(BasePlugin):
    def initialize(self, plugin_config):
        self.lake = str(plugin_config.get("lake") or "main")

    def configure_connection(self, conn):
        duck.configure(conn)
        resolve_for_dbt(self.lake).apply(conn)
