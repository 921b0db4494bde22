"""The dbt assets of dbt_project_synthetic: one `@dbt_assets` op running `dbt build`.

Each selected model is built into the lake the dpone plugin attaches for the configured workspace
(see `dpone_dagster.lake.dbt_plugin`); the plugin is told which tables this run writes, so in a
fork those tables replace their defer views. dbt tests run in the same `dbt build` and come back
as asset checks.

What a reader could get wrong: the dbt subprocess inherits the environment at the moment
`dbt.cli()` starts it, which is the only way to hand it this run's targets; the environment is set
for exactly that call, under a lock, and restored.
"""


import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from dagster import AssetExecutionContext
from dagster_dbt import DbtCliResource, dbt_assets

from dpone_dagster.defs.dbt.project import prepare_manifest, synthetic_dbt_project
from dpone_dagster.defs.dbt.translator import SyntheticDbtTranslator
from dpone_dagster.lake.dbt_plugin import TARGETS_ENV, targets_to_env

DBT_PROJECT = synthetic_dbt_project()
prepare_manifest(DBT_PROJECT)
TRANSLATOR = SyntheticDbtTranslator()

_ENV_LOCK = threading.Lock()


def selected_tables(context: AssetExecutionContext, lake: str) -> list[str]:
    """`schema.table` of every selected asset that is a table of `lake`."""
    return sorted(
        f"{key.path[1]}.{key.path[2]}"
        for key in context.selected_asset_keys
        if len(key.path) == 3 and key.path[0] == lake
    )


@contextmanager
def dbt_targets_env(targets: Sequence[str]) -> Iterator[None]:
    """Expose `targets` to a dbt subprocess started inside the block, and nothing after it."""
    with _ENV_LOCK:
        previous = os.environ.get(TARGETS_ENV)
        os.environ[TARGETS_ENV] = targets_to_env(targets)
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(TARGETS_ENV, None)
            else:
                os.environ[TARGETS_ENV] = previous


@dbt_assets(
    manifest=DBT_PROJECT.manifest_path,
    project=DBT_PROJECT,
    dagster_dbt_translator=TRANSLATOR,
    name="synthetic_dbt_build",
)
def synthetic_dbt_assets(context: AssetExecutionContext, dbt: DbtCliResource):
    with dbt_targets_env(selected_tables(context, TRANSLATOR.lake)):
        invocation = dbt.cli(["build"], context=context)
    yield from invocation.stream()
