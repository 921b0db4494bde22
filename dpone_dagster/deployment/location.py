"""Build the deployment code location (served as `dpone_dagster.deployment.definitions:defs`).

It loads the active installed development release from the local release cache of the protected
target environment and, in the embedded default, the executable synthetic-family release installed
beside it; it re-verifies every installed byte of both, and shows each task as a Dagster job:

- development tasks (native, ordinary, pre-hook), tagged `dpone/dormant=true`: launching one is
  refused by the standard runtime admission before any port (see `dpone_dagster.deployment.jobs`);
- synthetic-family tasks (ordinary, pre-hook), named `synthetic__…`, tagged `dpone/family=synthetic`:
  launching one runs it for real (init-fetch, credentials by alias, source read, writer into the
  synthetic runtime's own sandboxed lake).

A task's job runs the pre-hooks it depends on first (ops wired in dependency order), so a flow's
runtime never starts before its pre-hooks, even on a fresh lake.

- No protected target yet, or nothing activated yet: the location loads with no jobs.
- An installed release fails integrity verification: the location does not load, and the UI shows
  `deployment.integrity_failed` with the verification code.

What a reader could get wrong: this location never writes a cache. It reads the development cache
through an admission port that refuses every protected operation, so not even a bug here could
install, activate or repair a release. Reload the location in the UI after the release job activates
a new release; code locations are loaded once, not watched. This package never imports
`dpone_dagster.defs` (settings and platform types live in `dpone_dagster.release.platform`).
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.clock import Clock, SystemClock
from dpone_dagster.config import load_config
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.deployment.jobs import DeploymentRuntime, FamilyRelease, family_jobs
from dpone_dagster.release.active import (
    DeploymentLoadError,
    installed_admission_view,
    load_active_release,
    load_synthetic_release,
    read_only_cache,
)
from dpone_dagster.release.platform.settings import ReleaseSettings, release_settings
from dpone_dagster.release.platform.target import PlatformError, ProtectedTarget
from dpone_dagster.release.runtime.catalog import dormant_tasks, job_names, synthetic_tasks
from dpone_dagster.release.runtime.ports import AccessLedger

SYNTHETIC_JOB_PREFIX = "synthetic__"


def build_definitions(settings: ReleaseSettings, *, clock: Clock | None = None) -> dg.Definitions:
    clock = clock or SystemClock()
    protected = ProtectedTarget(settings.protected_target_file)
    if not settings.protected_target_file.exists():
        return dg.Definitions()
    try:
        environment = protected.configuration().environment
        installed = load_active_release(read_only_cache(settings, environment, clock))
        synthetic = load_synthetic_release(settings)
    except PlatformError:
        raise
    except CodedError as error:
        raise DeploymentLoadError(
            f"an installed release failed integrity verification ({error.code}: {error.message}); "
            "it was not loaded. Re-install it from the registry, or roll back to the previous deployment."
        ) from None
    runtime = DeploymentRuntime(
        settings=settings, ledger=AccessLedger(settings.access_ledger), clock=clock, target=protected
    )
    jobs = []
    if installed is not None:
        release = FamilyRelease(installed.bundle, installed_admission_view(installed), lake_dir=None)
        tasks = dormant_tasks(installed.bundle)
        jobs += family_jobs(tasks, job_names(tasks), runtime, release)
    if synthetic is not None and settings.runs_synthetic_runtime:
        release = FamilyRelease(
            synthetic, synthetic.admission_view(), lake_dir=settings.synthetic_runtime_root / "lake"
        )
        tasks = synthetic_tasks(synthetic.ordinary)
        jobs += family_jobs(tasks, [SYNTHETIC_JOB_PREFIX + name for name in job_names(tasks)], runtime, release)
    return dg.Definitions(jobs=jobs)


def location_definitions() -> dg.Definitions:
    """The deployment location for the configured environment."""
    return build_definitions(release_settings(load_config()))
