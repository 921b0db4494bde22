"""The integration package adopters import: fork-aware dbt assets and component, the lake resources, checks, jobs, sensors and the workspace-binding executor.

What a reader could get wrong: nothing here knows this repository's own dbt project; `dpone_dagster.defs` (this
repository's code location) uses this package exactly as an adopter does, and importing it never loads the demo.
"""
