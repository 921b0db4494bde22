"""The code location the concurrency test serves once per workspace: the real one plus one job.

`dpone_dagster.definitions.defs` as deployed (the deployment's workspace comes from `DPONE_WORKSPACE`
in the process environment, as in production), merged with `concurrency_job`: an asset job over one
fork-aware dbt model named by `DPONE_CONCURRENCY_MODEL` (`schema.table`). What a reader could get
wrong: nothing here chooses a workspace; each gRPC server is started with its own environment.
"""

from __future__ import annotations

import os

from dagster import AssetKey, Definitions, define_asset_job

from dpone_dagster.definitions import defs as deployed

_schema, _table = os.environ.get("DPONE_CONCURRENCY_MODEL", "staging.stg_orders").split(".")

defs = Definitions.merge(
    deployed,
    Definitions(jobs=[define_asset_job("concurrency_job", selection=[AssetKey(["main", _schema, _table])])]),
)
