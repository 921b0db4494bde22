"""Helpers for the dbt tests: lake setups built once per module, and ways to read them back.

dbt runs are slow, so tests that only read share one materialized lake per module (`LakeSetup`,
built by a module-scoped fixture). A setup is a state directory plus environment overrides; the
dbt subprocess sees them because they are set in `os.environ` while it starts. Readers open their
own DuckDB connection through `resolve()` with the same overrides and the setup's own extension
directory, so reading never touches the developer's `.dpone/`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.lake import duck
from dpone_dagster.lake.resolution.seam import resolve

REPO_ROOT = Path(__file__).resolve().parents[2]
DBT_PROJECT_DIR = REPO_ROOT / "dbt_project_synthetic"
MODEL_TABLES = (
    ("marts", "customer_lifetime_value"),
    ("marts", "daily_revenue"),
    ("marts", "dim_customers_scd2"),
    ("marts", "fct_orders"),
    ("raw", "raw_customers"),
    ("raw", "raw_orders"),
    ("raw", "raw_payments"),
    ("staging", "stg_customers"),
    ("staging", "stg_orders"),
    ("staging", "stg_payments"),
)


@dataclass
class LakeSetup:
    """A state directory and the environment that points dpone (and dbt) at it."""

    state_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {
            "DPONE_PROJECT_ROOT": str(REPO_ROOT),
            "DPONE_STATE_DIR": str(self.state_dir),
            **self.extra_env,
        }

    @property
    def extension_directory(self) -> Path:
        return self.state_dir / "duckdb_extensions"

    def config(self) -> DponeConfig:
        base = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
        return load_config({**base, **self.env})

    def applied(self) -> Iterator[None]:
        """Context manager: these overrides in `os.environ` (for code that reads it, and dbt)."""
        return _patched_env(self.env)

    def connect(self, *, workspace: str = "prod"):
        """A DuckDB connection with the lake attached; the caller closes it."""
        config = self.config()
        conn = duck.connect(extension_directory=self.extension_directory)
        resolve(workspace, "main", config=config).apply(conn)
        return conn

    def defer_views(self, workspace: str, *, sql: str | None = None) -> tuple[list[str], list[tuple]]:
        """`schema.view` of every defer view in `workspace`'s catalog, as its last run left them (the
        attach reads nothing, so it creates no view), and the rows of `sql` read on that connection."""
        conn = duck.connect(extension_directory=self.extension_directory)
        try:
            resolve(workspace, "main", config=self.config(), reads=()).apply(conn)
            views = sorted(
                r[0]
                for r in conn.execute(
                    "SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE database_name = 'lake_main'"
                ).fetchall()
            )
            return views, (conn.execute(sql).fetchall() if sql else [])
        finally:
            conn.close()

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        conn = self.connect()
        try:
            return conn.execute(sql, params or []).fetchall()
        finally:
            conn.close()

    def dbt(self, *args: str) -> subprocess.CompletedProcess:
        """Run the venv's dbt in the project with these overrides; fails the test on error."""
        from dpone_dagster.integration.dbt.project import dbt_executable

        env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
        env.update(self.env)
        env["DBT_TARGET_PATH"] = str(self.state_dir / "dbt_target")
        env["DBT_LOG_PATH"] = str(self.state_dir / "dbt_logs")
        done = subprocess.run(
            [dbt_executable(), *args, "--profiles-dir", str(DBT_PROJECT_DIR)],
            cwd=DBT_PROJECT_DIR,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.fail(f"dbt {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
        return done


class _patched_env:
    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.values.items():
            self.saved[key] = os.environ.get(key)
            os.environ[key] = value
        reset_store_cache()

    def __exit__(self, *exc) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        reset_store_cache()


def materialize_synthetic_dbt(setup: LakeSetup, instance=None, selection=None):
    """Materialize every dbt asset through the code location's definitions, into `setup`."""
    from dagster import materialize

    from dpone_dagster.definitions import defs
    from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets

    with setup.applied():
        return materialize(
            [synthetic_dbt_assets],
            resources=dict(defs.resources or {}),
            instance=instance,
            selection=selection,
            raise_on_error=False,
        )
