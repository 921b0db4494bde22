"""The dbt CLI resource the dbt assets run: dagster-dbt's `DbtCliResource` without three fixed costs.

Before it starts `dbt build`, `DbtCliResource.cli()` (dagster-dbt 0.29) does two things a
fork-aware run never uses, each costing about as much as a small dbt run itself:

- it runs `dbt --version` in a subprocess (a whole dbt start-up) to learn whether the executable is
  dbt Core or the Fusion engine. When the executable is the `dbt` installed next to this interpreter
  (`project.dbt_executable()`, the venv's), its version *is* the installed dbt-core package's
  (`dagster_dbt.compat.DBT_PYTHON_VERSION`); any other executable is still asked.
- it builds a dbt Core adapter in-process (profile, project, adapter registration, the base
  macros). dagster-dbt uses that adapter only for `fetch_row_counts()` and
  `fetch_column_metadata()`; the dpone assets take their row counts from the lake after dbt exits
  (`factory.with_lake_metadata`), so no adapter is built (`adapter=None` is dagster-dbt's own
  fallback when building one fails).

In a process that started a pre-imported dbt (`prewarm.py`), `cli()` runs dagster-dbt's own `cli`
with that dbt's client as the executable, for the venv's own dbt only: the same command, arguments,
environment and streams, without dbt's ~1.3 s import.

What a reader could get wrong: both overrides are of private dagster-dbt members
(`_cli_version`, `_initialize_dbt_core_adapter`). `tests/dbt/test_inner_loop_costs.py` fails if a
dagster-dbt upgrade renames them (the costs would silently come back). A project that wants
`fetch_row_counts()` on this resource must use a plain `DbtCliResource`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from dagster_dbt import DbtCliInvocation, DbtCliResource
from dagster_dbt.compat import DBT_PYTHON_VERSION
from packaging import version

from dpone_dagster.integration.dbt.prewarm import is_prewarmed_client, prewarmed_client


def is_installed_dbt(executable: str) -> bool:
    """True when `executable` is the `dbt` script next to this interpreter (same venv, same dbt-core)."""
    return Path(executable).absolute() == Path(sys.executable).with_name("dbt").absolute()


class InstalledDbtCliResource(DbtCliResource):
    """`DbtCliResource` that neither asks `dbt --version` of the venv's dbt nor builds an adapter."""

    @cached_property
    def _cli_version(self) -> version.Version:
        installed = is_installed_dbt(self.dbt_executable) or is_prewarmed_client(self.dbt_executable)
        if DBT_PYTHON_VERSION is not None and installed:
            return DBT_PYTHON_VERSION
        return DbtCliResource._cli_version.func(self)  # another dbt: ask it, as dagster-dbt does

    def cli(self, args: Sequence[str], **kwargs: Any) -> DbtCliInvocation:
        """dagster-dbt's `cli`, run by the pre-imported dbt when this process started one (`prewarm.py`)."""
        client = prewarmed_client() if is_installed_dbt(self.dbt_executable) else None
        if client is None:
            return super().cli(args, **kwargs)
        return DbtCliResource.cli(self.model_copy(update={"dbt_executable": client}), args, **kwargs)

    def _initialize_dbt_core_adapter(self, args: Sequence[str]):  # noqa: ARG002 (dagster-dbt's signature)
        return None  # only fetch_row_counts/fetch_column_metadata use it; dpone reads the lake
