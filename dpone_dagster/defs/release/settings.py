"""Re-export: the release settings live in `dpone_dagster.platform.settings` (below both entry points).

What a reader could get wrong: this module defines nothing; import from `dpone_dagster.platform.settings`
in new code (the deployment location must, it never imports `dpone_dagster.defs`).
"""

from dpone_dagster.platform.settings import ReleaseSettings, release_settings

__all__ = ["ReleaseSettings", "release_settings"]
