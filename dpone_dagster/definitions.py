"""The code location's one entry point: every domain's `defs`, merged.

Each domain exports a `defs` object from `dpone_dagster/defs/<domain>/__init__.py`; this file only
gathers them.
"""

from __future__ import annotations

from dagster import Definitions

from dpone_dagster.defs import dbt, lake, release

defs = Definitions.merge(dbt.defs, lake.defs, release.defs)
