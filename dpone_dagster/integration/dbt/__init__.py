"""Fork-aware dbt: the factory and the dg component (everything for one project), the run mechanics, the
partitioned op, the translator, the dbt CLI resource, the guarded manifest preparation and the read sets.

What a reader could get wrong: importing this package in a process that executes runs (a run worker,
`dagster asset materialize`) starts a pre-imported dbt beside it (`prewarm.py`), on purpose before
any submodule imports dagster-dbt; anywhere else (a code server, the webserver, tests, `dpone`) it
does nothing.
"""

from dpone_dagster.integration.dbt.prewarm import start_if_executing_runs

start_if_executing_runs()
