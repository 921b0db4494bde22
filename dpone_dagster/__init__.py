"""dpone-dagster: fork data environments for DuckLake and signed development release federation,
as a Dagster code location."""

__version__ = "0.1.0"
