"""dbt-duckdb plugin for sealed native compiles: the throwaway in-memory DuckDB, made offline-safe.

dbt-duckdb opens the connection; this plugin hands it to `dpone_dagster.lake.duck.configure`, the
project's one place that configures DuckDB (extension directory pinned, autoinstall and autoload
off). It loads no extension and attaches no lake: compiling needs neither. What a reader could get
wrong: the extension directory comes from the plugin config written by `native.py`, never from the
environment, because the compile subprocess runs with a scrubbed environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from dpone_dagster.lake.duck import configure


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self.extension_directory = Path(plugin_config["extension_directory"])

    def configure_connection(self, conn) -> None:
        configure(conn, extensions=(), extension_directory=self.extension_directory)
