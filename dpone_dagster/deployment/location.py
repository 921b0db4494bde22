"""Build the dormant deployment code location (served as `dpone_dagster.deployment.definitions:defs`).

It loads the active installed release from the local release cache of the protected target
environment, re-verifies every installed byte (`ReleaseCache.load`: sealed projection and artifact
integrity), and shows each native, ordinary and pre-hook task as a Dagster job. Launching any of
them is refused by the standard runtime admission (see `dpone_dagster.deployment.jobs`).

- No protected target yet, or nothing activated yet: the location loads with no jobs.
- The active release fails integrity verification: the location does not load, and the UI shows
  `deployment.integrity_failed` with the release identity and the verification code.

What a reader could get wrong: this location never writes the cache. It builds the cache with an
admission port that refuses every protected operation, so not even a bug here could install,
activate or repair a release. Reload the location in the UI after the release job activates a new
release; code locations are loaded once, not watched.
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.config import load_config
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.defs.release.platform import PlatformError, ProtectedTarget
from dpone_dagster.defs.release.settings import ReleaseSettings, release_settings
from dpone_dagster.deployment.active import (
    DeploymentLoadError,
    installed_admission_view,
    load_active_release,
    read_only_cache,
)
from dpone_dagster.deployment.jobs import DeploymentRuntime, dormant_job
from dpone_dagster.deployment.runtime import AccessLedger
from dpone_dagster.deployment.tasks import dormant_tasks, job_names
from dpone_dagster.clock import Clock, SystemClock


def build_definitions(settings: ReleaseSettings, *, clock: Clock | None = None) -> dg.Definitions:
    clock = clock or SystemClock()
    protected = ProtectedTarget(settings.protected_target_file)
    if not settings.protected_target_file.exists():
        return dg.Definitions()
    try:
        environment = protected.configuration().environment
        installed = load_active_release(read_only_cache(settings, environment, clock))
    except PlatformError:
        raise
    except CodedError as error:
        raise DeploymentLoadError(
            f"the active installed release failed integrity verification ({error.code}: {error.message}); "
            "it was not loaded. Re-install it from the registry, or roll back to the previous deployment."
        ) from None
    if installed is None:
        return dg.Definitions()
    tasks = dormant_tasks(installed.bundle)
    runtime = DeploymentRuntime(
        installed=installed,
        ledger=AccessLedger(settings.access_ledger),
        clock=clock,
        epochs=protected,
    )
    view = installed_admission_view(installed)
    jobs = [dormant_job(task, name, runtime, view) for task, name in zip(tasks, job_names(tasks), strict=True)]
    return dg.Definitions(jobs=jobs)


def location_definitions() -> dg.Definitions:
    """The deployment location for the configured environment."""
    return build_definitions(release_settings(load_config()))
