"""The release domain: the six release stages as assets, their checks, resources, sensors and job.

`build_defs()` is how every domain of `dpone_dagster.defs` hands over its definitions (called once by
`dpone_dagster.definitions`). Importing this package builds nothing, so importing `settings` or
`platform` from here (as the dormant deployment location does) does not load the release pipeline
and its dbt machinery.
"""

from __future__ import annotations

from dagster import Definitions


def build_defs() -> Definitions:
    from dpone_dagster.defs.release.definitions import location_definitions

    return location_definitions()
