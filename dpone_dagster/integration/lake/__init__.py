"""The lake domain as Dagster objects.

`DuckLakeResource`, fork observations, staleness and diff checks, fork jobs, sensors.

`definitions.fork_lake_definitions()` hands all of them to a code location in one call."""
