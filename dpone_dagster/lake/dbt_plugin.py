"""The dbt-duckdb plugin that makes every connection dbt opens offline-safe and lake-attached.

dbt_project_synthetic's profile lists this module under `plugins:`. dbt-duckdb calls
`configure_connection` once per DuckDB instance it opens, after `duckdb.connect()` and before any
model SQL; the plugin then

1. runs `duck.configure()` (project-local extension directory, autoinstall and autoload off,
   extensions loaded from their wheels), and
2. attaches the lake through `resolve(workspace, lake, targets=...)` -> `ResolvedLake.apply()`, so
   a fork's dbt run writes its own namespace exactly like every other DuckLake access.

The workspace is the configured one (`DPONE_WORKSPACE`, through `dpone_dagster.config`). The
targets are the tables this dbt invocation will write; the Dagster dbt asset hands them over in
`DPONE_DBT_TARGETS` (comma-separated `schema.table`), because dbt offers no other channel from the
caller into a plugin that does not also invalidate dbt's partial parsing.

What a reader could get wrong: the profile's `database` must be the alias `resolve()` attaches
(`lake_<lake>`), and the profile's `attach:` entry with that alias is only a declaration for
dbt-duckdb (it lets `database` name the alias and switches on DuckLake-specific SQL). The plugin
attaches first, so dbt-duckdb's own `ATTACH IF NOT EXISTS` never runs against the lake; the plugin
refuses to start when the two names disagree, rather than letting dbt write somewhere else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from dpone_dagster.config import DEFAULT_LAKE, load_config
from dpone_dagster.errors import LakeError
from dpone_dagster.lake import duck
from dpone_dagster.lake.resolve import ResolvedLake, resolve

TARGETS_ENV = "DPONE_DBT_TARGETS"


class ProfileMismatchError(LakeError):
    code = "lake.dbt_profile_mismatch"


def targets_to_env(targets: Sequence[str]) -> str:
    """The `DPONE_DBT_TARGETS` value for a list of `schema.table` names (order-insensitive)."""
    for target in targets:
        if "," in target:
            raise LakeError(f"a dbt target name cannot contain a comma: {target!r}")
    return ",".join(sorted(set(targets)))


def targets_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    raw = (os.environ if environ is None else environ).get(TARGETS_ENV, "")
    return tuple(part for part in (p.strip() for p in raw.split(",")) if part)


def resolve_for_dbt(lake: str, environ: Mapping[str, str] | None = None) -> ResolvedLake:
    """What the plugin attaches: the configured workspace's `lake`, with this run's targets."""
    config = load_config(environ)
    return resolve(config.workspace, lake, config=config, targets=targets_from_env(environ))


class Plugin(BasePlugin):
    """dbt-duckdb plugin; profile config: `lake` (default `main`)."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self.lake = str(plugin_config.get("lake") or DEFAULT_LAKE)
        self.resolved: ResolvedLake | None = None

    def configure_connection(self, conn) -> None:
        duck.configure(conn)
        resolved = resolve_for_dbt(self.lake)
        database = getattr(self.creds, "database", None)
        if database != resolved.alias:
            raise ProfileMismatchError(
                f"the dbt profile's database is {database!r}, but lake {self.lake!r} is attached as "
                f"{resolved.alias!r}; set `database: {resolved.alias}` and the matching attach alias"
            )
        resolved.apply(conn)
        self.resolved = resolved
