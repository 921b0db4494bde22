"""The lake domain as Dagster objects: `DuckLakeResource`, fork observations, staleness and diff checks, fork jobs, sensors."""
