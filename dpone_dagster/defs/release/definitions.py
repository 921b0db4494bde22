"""The release domain's `Definitions`: stage assets, checks, the release job, sensors and resources.

What a reader could get wrong: importing this module builds nothing. `dpone_dagster.defs.release.defs`
(built on first access) reads the settings once, when the code location loads, from the one
configuration (`dpone_dagster.config.load_config`); tests call `build_definitions` with their own.
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.config import load_config
from dpone_dagster.defs.release.assets import RELEASE_ASSETS
from dpone_dagster.defs.release.checks import RELEASE_CHECKS
from dpone_dagster.defs.release.jobs import release_job
from dpone_dagster.defs.release.operations import OPERATION_JOBS
from dpone_dagster.defs.release.resources import release_resources
from dpone_dagster.defs.release.sensors import build_release_inputs_sensor, build_revocation_sensor
from dpone_dagster.defs.release.stage_values import IO_MANAGER_KEY, release_stage_values
from dpone_dagster.release.platform.settings import ReleaseSettings, release_settings


def build_definitions(settings: ReleaseSettings) -> dg.Definitions:
    return dg.Definitions(
        assets=list(RELEASE_ASSETS),
        asset_checks=list(RELEASE_CHECKS),
        jobs=[release_job, *OPERATION_JOBS],
        sensors=[build_release_inputs_sensor(settings), build_revocation_sensor(settings)],
        resources={**release_resources(settings), IO_MANAGER_KEY: release_stage_values()},
    )


def location_definitions() -> dg.Definitions:
    """The release domain for the configured environment (what the code location serves)."""
    return build_definitions(release_settings(load_config()))
