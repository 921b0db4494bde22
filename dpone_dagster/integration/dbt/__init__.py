"""Fork-aware dbt: the `@dbt_assets` factory, the dg component, the translator, the dbt CLI resource, the guarded manifest."""
