"""The integration package adopters import.

Fork-aware dbt assets and component, the lake resources, checks, jobs, sensors and the
workspace-binding executor.

Where to start: `integration.dbt.factory.fork_aware_dbt_definitions(project_dir=...)` (or the dg component
`integration.dbt.component.ForkAwareDbtProjectComponent`) gives a code location everything for one dbt
project; `integration.lake.definitions.fork_lake_definitions()` is the lake domain alone.

What a reader could get wrong: nothing here knows this repository's own dbt project; `dpone_dagster.defs` (this
repository's code location) uses this package exactly as an adopter does, and importing any module of it never
loads the demo nor reads a dbt project (`tests/dbt/test_integration_imports.py`).
"""
