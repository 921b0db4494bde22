"""The release domain: the six release stages as assets, their checks, resources, sensors and job.

`defs` is built on first access (PEP 562), so importing `settings` or `platform` from here (as the
dormant deployment location does) does not load the release pipeline and its dbt machinery.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _defs() -> Any:
    from dpone_dagster.defs.release.definitions import location_definitions

    return location_definitions()


def __getattr__(name: str) -> Any:
    if name == "defs":
        return _defs()
    raise AttributeError(name)
