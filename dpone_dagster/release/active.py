"""Read the active installed releases, re-verified, and never write: the development release from the
local release cache, and (embedded default only) the executable synthetic-family release.

What a reader could get wrong: the cache is opened with an admission port that refuses every
protected operation, so code holding this cache object cannot install, activate or repair anything;
reading needs no receipt (expired or revoked authority blocks new attempts, never the evidence).
"""

from __future__ import annotations

from dpone_dagster.authority.target_admission import AdmissionError
from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import parse_timestamp
from dpone_dagster.errors import DponeError
from dpone_dagster.release.delivery.deployments import InstalledRelease
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.runtime.admission import AdmissionView, admission_view
from dpone_dagster.release.runtime.synthetic_release import SyntheticBundle, SyntheticReleaseStore


class DeploymentLoadError(DponeError):
    code = "deployment.integrity_failed"


class _ReadOnly:
    """A `TargetAdmission` that refuses every protected operation."""

    def require_current(self, receipt: object, kind: type, **_: object) -> object:
        raise AdmissionError("admission.receipt_missing", "the deployment location never installs or activates")


def read_only_cache(settings: ReleaseSettings, environment: str, clock: Clock) -> ReleaseCache:
    return ReleaseCache(settings.cache_root / environment, admission=_ReadOnly(), clock=clock)


def load_active_release(cache: ReleaseCache) -> InstalledRelease | None:
    """The active deployment, fully re-verified; None when nothing was ever activated."""
    pointer = cache.current()
    if pointer is None:
        return None
    installed = cache.load(pointer.release_id)
    if installed.record.deployment_id != pointer.deployment_id:
        raise DeploymentLoadError("the current pointer names a deployment the installed record does not")
    return installed


def installed_admission_view(installed: InstalledRelease) -> AdmissionView:
    """What runtime admission decides on: the installed projection plus its recorded authority."""
    return admission_view(
        installed.bundle,
        authority_expires_at=parse_timestamp(installed.record.authority_expires_at),
        revocation_epoch=installed.record.revocation_epoch,
    )


def load_synthetic_release(settings: ReleaseSettings) -> SyntheticBundle | None:
    """The current synthetic-family release, fully re-verified.

    None on a configured platform or before one is installed.
    """
    if not settings.runs_synthetic_runtime:
        return None
    return SyntheticReleaseStore(settings.synthetic_runtime_root).load_current()
