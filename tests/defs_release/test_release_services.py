"""One composition of the release services (`compose_release_services`) for the resources and the CLI.

What this pins: a stage runs on the resource objects it is given (a replaced resource is the one
used), the pipeline and the operations share one cache, registry and issuer, and `dpone release ...`
composes from the configured settings the same parts the location's resources hold.
"""

from __future__ import annotations

from types import SimpleNamespace

from dpone_dagster.defs.release.resources import AuthorityPlatform, release_resources, release_services
from dpone_dagster.release.services import ReleasePlatform, ReleaseRegistryLocation


class RegistryElsewhere(ReleaseRegistryLocation):
    def registry(self):
        registry = super().registry()
        registry.name = "replaced by the test"
        return registry


def _resources(settings) -> SimpleNamespace:
    return SimpleNamespace(
        **{key: definition.resource_fn(None) for key, definition in release_resources(settings).items()}
    )


def test_the_services_run_on_the_resources_they_are_given(fresh, env_of):
    setup = env_of(fresh)
    AuthorityPlatform(setup.settings).prepare()
    resources = _resources(setup.settings)
    resources.release_registry = RegistryElsewhere(setup.settings)

    services = release_services(resources)

    pipeline, operations = services.pipeline, services.operations
    assert pipeline.registry.name == "replaced by the test"
    assert operations.registry is pipeline.registry and operations.cache is pipeline.cache
    assert operations.issuer is services.issuer is pipeline.admission
    assert operations.grant is resources.authority_platform
    assert pipeline.clock is resources.authority_platform.clock
    assert operations.repository == setup.settings.source_repository


def test_the_cli_composes_the_parts_the_location_resources_hold(fresh, env_of):
    from dpone_dagster.cli.release import _operations

    setup = env_of(fresh)
    AuthorityPlatform(setup.settings).prepare()
    resources = _resources(setup.settings)
    platform = ReleasePlatform.from_settings(setup.settings)
    for part, key in (
        ("authority", "authority_platform"),
        ("admission", "target_admission"),
        ("registry", "release_registry"),
        ("cache", "release_cache"),
        ("source", "release_source"),
    ):
        assert getattr(platform, part).settings == getattr(resources, key).settings, part

    by_cli, by_job = _operations(), release_services(resources).operations
    assert by_cli.cache.root == by_job.cache.root
    assert by_cli.registry.store.root == by_job.registry.store.root
    assert by_cli.issuer.target == by_job.issuer.target
    assert by_cli.repository == by_job.repository
