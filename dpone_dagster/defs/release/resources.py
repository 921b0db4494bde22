"""The release resources of this code location: the release platform's five parts as Dagster resources.

Each resource is one part of `dpone_dagster.release.services.ReleasePlatform` over `ReleaseSettings`,
handed to Dagster as a hard-coded resource: it has no run configuration, on purpose. Dagster lets a
launch override any configurable field, and the pinned policy digest, the target environment and the
registry location must never be something a launchpad user can type. Tests pass their own objects
under the same keys.

- `authority_platform`: `AuthorityPlatform`, the service's `ReleaseAuthority` plus what only this
  location does: in the embedded default it first creates (and renews) the synthetic authority
  (`synthetic_bootstrap`); for a configured platform (`release:` in the configuration, see
  `settings.py`) it only reads what the platform placed.
- `target_admission`, `release_registry`, `release_cache`, `release_source`: the service's
  `ReleaseAdmission`, `ReleaseRegistryLocation`, `ReleaseCacheLocation`, `ReleaseSourceLocation`.

`release_services(resources)` hands a run's five resources to the one composition
(`compose_release_services`), which `dpone release recover|...` calls too; `release_pipeline` is its
pipeline and issuer, what the stages use.

What a reader could get wrong: nothing here composes a service; a stage that needs the pipeline asks
`release_pipeline(context.resources)`, so a resource a test replaces is the one the stage runs on.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.defs.release.synthetic_bootstrap import (
    GrantRenewal,
    ensure_synthetic_authority,
    renew_expired_synthetic_grant,
)
from dpone_dagster.release.pipeline import ReleasePipeline
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.services import (
    ReleaseAdmission,
    ReleaseAuthority,
    ReleaseCacheLocation,
    ReleasePlatform,
    ReleaseRegistryLocation,
    ReleaseServices,
    ReleaseSourceLocation,
    compose_release_services,
    location_label,
)


@dataclass
class AuthorityPlatform(ReleaseAuthority):
    """The authority part, plus the embedded default's synthetic authority (created and renewed here)."""

    def prepare(self) -> bool:
        """Create the synthetic authority in the embedded default; a no-op for a configured platform."""
        return ensure_synthetic_authority(self.settings, self.clock) if self.settings.synthetic else False

    def renew_expired_grant(self) -> GrantRenewal | None:
        """Embedded default only: renew an expired synthetic grant (logged; the grant stage shows it)."""
        return renew_expired_synthetic_grant(self.settings, self.clock) if self.settings.synthetic else None


def release_services(resources) -> ReleaseServices:
    """The release services over a run's (or a test's) five release resources."""
    return compose_release_services(
        ReleasePlatform(
            authority=resources.authority_platform,
            admission=resources.target_admission,
            registry=resources.release_registry,
            cache=resources.release_cache,
            source=resources.release_source,
        )
    )


def release_pipeline(resources) -> tuple[ReleasePipeline, ReceiptIssuer]:
    """The pipeline service over the run's resources, and the receipt issuer it admits with."""
    services = release_services(resources)
    return services.pipeline, services.issuer


RESOURCE_KEYS = frozenset(
    {"authority_platform", "target_admission", "release_registry", "release_cache", "release_source"}
)


def release_resources(settings: ReleaseSettings) -> dict[str, dg.ResourceDefinition]:
    """The release resources for `settings`, without run configuration (see the module docstring)."""
    described = {
        "authority_platform": (
            AuthorityPlatform(settings),
            (
                f"Original policy, grant and signature bytes from {location_label(settings.authority_location)}; "
                "pinned policy digest from the protected target"
            )
            + (" (SYNTHETIC embedded default)" if settings.synthetic else " (configured platform)"),
        ),
        "target_admission": (
            ReleaseAdmission(settings),
            (
                "Receipt issuer for the protected target; reopens its policy digest and revocation epoch before "
                "every protected operation"
            ),
        ),
        "release_registry": (
            ReleaseRegistryLocation(settings),
            f"Immutable release registry at {location_label(settings.registry_location)}",
        ),
        "release_cache": (
            ReleaseCacheLocation(settings),
            f"Local immutable release cache of the target environment at {location_label(settings.cache_root)}",
        ),
        "release_source": (
            ReleaseSourceLocation(settings),
            f"Source repository {settings.source_repository} at {settings.source_commit[:12]}",
        ),
    }
    return {key: _fixed(value, description) for key, (value, description) in described.items()}


def _fixed(value: object, description: str) -> dg.ResourceDefinition:
    """A resource whose config schema is the empty shape: any run configuration is rejected."""
    return dg.ResourceDefinition(resource_fn=lambda _context: value, config_schema={}, description=description)
