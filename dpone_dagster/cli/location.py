"""The code location a command works on, loaded by module name: what `dpone demo` and `dpone dev` run.

`load_location(module)` imports the location module named by a string (default
`dpone_dagster.definitions`, this repository's own location) and returns its `Definitions`: the one
`Definitions` object at module scope, or the result of its one `@dg.definitions` function, the two
shapes `dagster dev -m module` loads. `lake_assets(location)` are the unpartitioned DuckLake table
assets a demo materializes in one run; `ducklake_keys(location)` every DuckLake table asset's key.

What a reader could get wrong: the CLI never imports a location statically (nothing under `cli/`
imports `dpone_dagster.defs` or `dpone_dagster.definitions`; a test reads every import), so the
module is a value a later `-m module` option can set. A location module is imported once per process,
as Dagster does: a `Definitions` object built at its import keeps the configuration of that moment.
"""

from __future__ import annotations

import importlib

import dagster as dg

from dpone_dagster.errors import ConfigError
from dpone_dagster.integration.lake.observations import LAKE_KIND

DEFAULT_LOCATION = "dpone_dagster.definitions"


class LocationUnloadableError(ConfigError):
    code = "config.location_unloadable"


def load_location(module: str = DEFAULT_LOCATION) -> dg.Definitions:
    """The `Definitions` of the location module named `module` (see the module docstring)."""
    from dagster.components.definitions import LazyDefinitions

    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not (module == error.name or module.startswith(error.name + ".")):
            raise  # the location exists but one of its own imports is missing: that is its bug to show
        raise LocationUnloadableError(f"no location module named {module!r}") from None
    found = [value for value in vars(loaded).values() if isinstance(value, (dg.Definitions, LazyDefinitions))]
    if len(found) != 1:
        raise LocationUnloadableError(
            f"location module {module!r} must hold exactly one Definitions object or @dg.definitions "
            f"function at module scope; it holds {len(found)}"
        )
    (definitions,) = found
    return definitions() if isinstance(definitions, LazyDefinitions) else definitions


def lake_assets(location: dg.Definitions) -> list[dg.AssetsDefinition]:
    """The unpartitioned assets of `location` whose every asset is a DuckLake table (kind `ducklake`)."""
    return [
        assets
        for assets in location.assets or []
        if isinstance(assets, dg.AssetsDefinition)
        and assets.partitions_def is None
        and (specs := list(assets.specs))
        and all(LAKE_KIND in spec.kinds for spec in specs)
    ]


def ducklake_keys(location: dg.Definitions) -> list[dg.AssetKey]:
    """Asset keys of every DuckLake table asset (kind `ducklake`) of `location`."""
    return sorted((spec.key for spec in location.resolve_all_asset_specs() if LAKE_KIND in spec.kinds), key=str)
