"""Fork-aware dbt: the factory and the dg component (everything for one project), the run mechanics, the
partitioned op, the translator, the dbt CLI resource, the guarded manifest preparation and the read sets."""
