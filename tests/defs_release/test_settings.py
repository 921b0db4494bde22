"""A configured release platform (`release:` in dpone.yaml) drives the release stages, on a directory and on S3.

The platform's own part (pinning a policy digest in the protected target file, placing a signed grant
in the authority location) is played here by the synthetic signer writing into the configured
locations, exactly once, before the run; the run itself sees `synthetic=False` and must never create
or renew anything.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from dpone_dagster.api_release import run_release_job
from dpone_dagster.clock import SystemClock
from dpone_dagster.config import load_config
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.defs.release.definitions import location_definitions
from dpone_dagster.defs.release.synthetic_bootstrap import ensure_synthetic_authority
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.platform.settings import ReleaseSettings, release_settings
from dpone_dagster.release.platform.target import GRANT_KEY, POLICY_KEY, SIGNATURES_KEY
from dpone_dagster.release.run_summary import ReleaseRunError

from .conftest import REPO_ROOT, assert_no_private_values, materializations, step_failures

PLATFORM_REPOSITORY = "example.invalid/platform/analytics"
PLATFORM_COMMIT = "fedcba98" * 5
AUTHORITY_FILES = (POLICY_KEY, GRANT_KEY, SIGNATURES_KEY)


def _configure(monkeypatch, tmp_path: Path, release_yaml: str) -> ReleaseSettings:
    config_file = tmp_path / "dpone.yaml"
    project = f"dbt_project_dir: {REPO_ROOT / 'dbt_project_synthetic'}\n"  # no default since issue 18
    config_file.write_text(project + "release:\n" + release_yaml, encoding="utf-8")
    monkeypatch.setenv("DPONE_CONFIG", str(config_file))
    reset_store_cache()
    return release_settings(load_config())


def _platform_checkout(tmp_path: Path) -> tuple[Path, str]:
    """The synthetic project as a platform checks it out: its own git checkout; returns (path, HEAD).

    A configured platform's source must be at the configured commit (`source.commit_mismatch`)."""
    checkout = tmp_path / "checkout"
    if not checkout.exists():
        ignored = shutil.ignore_patterns("target", "logs", "dbt_packages", ".dpone", "__pycache__")
        shutil.copytree(REPO_ROOT / "dbt_project_synthetic", checkout, ignore=ignored)
        for args in (
            ("init", "-q"),
            ("add", "-A"),
            ("-c", "user.email=platform@example.invalid", "-c", "user.name=platform", "commit", "-qm", "checkout"),
        ):
            subprocess.run(["git", "-C", str(checkout), *args], check=True, capture_output=True)
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return checkout, head


def _directory_platform(tmp_path: Path, commit: str | None = None) -> str:
    checkout, head = _platform_checkout(tmp_path)
    return f"""
  authority_location: {tmp_path / "platform" / "authority"}
  registry_location: {tmp_path / "platform" / "registry"}
  cache_root: {tmp_path / "platform" / "cache"}
  protected_target_file: {tmp_path / "platform" / "protected" / "target.json"}
  source_location: {checkout}
  source_repository: {PLATFORM_REPOSITORY}
  source_commit: "{commit or head}"
"""


def _place_authority(settings: ReleaseSettings, authority_dir: Path) -> dict[str, bytes]:
    """The platform's part: pin the policy digest and sign a grant for the configured source."""
    # The synthetic signer derives native membership from the repository's own dbt project; the
    # run reads the platform checkout (`_platform_checkout`, the same files at a real commit).
    update = {
        "synthetic": True,
        "authority_location": str(authority_dir),
        "source_location": REPO_ROOT / "dbt_project_synthetic",
    }
    signer_view = settings.model_copy(update=update)
    ensure_synthetic_authority(signer_view, SystemClock())
    return {key: (authority_dir / key).read_bytes() for key in AUTHORITY_FILES}


def _run() -> dg.ExecuteInProcessResult:
    job = location_definitions().resolve_job_def("release_job")
    return job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)


def _metadata_values(result: dg.ExecuteInProcessResult) -> list[object]:
    values: list[object] = [v for meta in materializations(result).values() for v in meta.values()]
    values += [
        v for check in result.get_asset_check_evaluations() for v in (check.description, *check.metadata.values())
    ]
    return values + list(step_failures(result).values())


def test_without_a_release_section_the_embedded_default_is_synthetic(_isolated_state):
    settings = release_settings(load_config())
    assert settings.synthetic is True
    assert Path(settings.authority_location).is_relative_to(_isolated_state)
    assert settings.protected_target_file.is_relative_to(_isolated_state)


def test_a_release_section_is_a_configured_platform_with_project_relative_paths(monkeypatch, tmp_path, _isolated_state):
    settings = _configure(
        monkeypatch,
        tmp_path,
        f"""
  authority_location: s3://platform-bucket/authority/
  registry_location: releases/registry
  cache_root: releases/cache
  protected_target_file: /etc/dpone/target.json
  source_location: dbt_project_synthetic
  source_repository: {PLATFORM_REPOSITORY}
  source_commit: "{PLATFORM_COMMIT}"
  storage: {{region: eu-west-1, key_id_env: PLATFORM_S3_KEY, secret_env: PLATFORM_S3_SECRET}}
""",
    )
    assert settings.synthetic is False
    assert settings.authority_location == "s3://platform-bucket/authority/"
    assert settings.registry_location == str(REPO_ROOT / "releases" / "registry")
    assert settings.cache_root == REPO_ROOT / "releases" / "cache"
    assert settings.protected_target_file == Path("/etc/dpone/target.json")
    assert settings.source_location == REPO_ROOT / "dbt_project_synthetic"
    assert (settings.source_repository, settings.source_commit) == (PLATFORM_REPOSITORY, PLATFORM_COMMIT)
    assert settings.storage.secret_env == "PLATFORM_S3_SECRET"
    assert settings.access_ledger.is_relative_to(_isolated_state)
    platform = location_definitions().resources["authority_platform"].resource_fn(None)
    assert platform.settings == settings


def test_configured_directory_platform_drives_every_stage_and_never_signs(monkeypatch, tmp_path, _isolated_state):
    settings = _configure(monkeypatch, tmp_path, _directory_platform(tmp_path))
    placed = _place_authority(settings, Path(settings.authority_location))

    result = _run()

    assert result.success, step_failures(result)
    found = materializations(result)
    assert found["development_policy"]["synthetic"] is False
    assert found["development_policy"]["synthetic_authority_written"] is False
    release_hex = found["installed_release"]["release_id"].removeprefix("sha256:")
    registry = LocalDirectoryStore(Path(settings.registry_location))
    assert f"releases/{release_hex}.json" in set(registry.keys())
    assert (settings.cache_root / "synthetic-dev").is_dir()
    assert {key: (Path(settings.authority_location) / key).read_bytes() for key in AUTHORITY_FILES} == placed
    assert not (_isolated_state / "release" / "authority").exists()
    assert not (_isolated_state / "release" / "registry").exists()
    assert_no_private_values(_metadata_values(result), private=[str(tmp_path)])


def test_configured_platform_reads_a_git_archive_bound_by_the_commit_it_records(monkeypatch, tmp_path, _isolated_state):
    checkout, head = _platform_checkout(tmp_path)
    archive = tmp_path / "source.tar.gz"
    subprocess.run(["git", "-C", str(checkout), "archive", "--format=tar.gz", "-o", str(archive), "HEAD"], check=True)
    platform = _directory_platform(tmp_path).replace(f"source_location: {checkout}", f"source_location: {archive}")
    settings = _configure(monkeypatch, tmp_path, platform)
    _place_authority(settings, Path(settings.authority_location))

    result = _run()

    assert result.success, step_failures(result)
    composed = materializations(result)["development_release"]
    assert composed["source_archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()


def test_configured_source_not_at_the_configured_commit_stops_before_anything_is_built(
    monkeypatch, tmp_path, _isolated_state
):
    _, head = _platform_checkout(tmp_path)
    settings = _configure(monkeypatch, tmp_path, _directory_platform(tmp_path, commit="fedcba98" * 5))
    _place_authority(settings, Path(settings.authority_location))

    result = _run()

    assert not result.success
    failures = step_failures(result)
    assert "source.commit_mismatch" in failures["native_workspace"], failures
    assert head[:12] in failures["native_workspace"]
    assert not list(LocalDirectoryStore(Path(settings.registry_location)).keys())


def test_configured_platform_with_nothing_placed_refuses_and_creates_nothing(monkeypatch, tmp_path):
    settings = _configure(monkeypatch, tmp_path, _directory_platform(tmp_path))

    with pytest.raises(ReleaseRunError) as refused:
        run_release_job(location_definitions(), dg.DagsterInstance.ephemeral())

    assert refused.value.code == "release.protected_target_unavailable"
    assert not Path(settings.authority_location).exists()
    assert not settings.protected_target_file.exists()
    assert not Path(settings.registry_location).exists()


def _s3_platform(tmp_path: Path, s3_server, bucket: str) -> str:
    checkout, head = _platform_checkout(tmp_path)
    return f"""
  authority_location: s3://{bucket}/platform/authority/
  registry_location: s3://{bucket}/platform/registry/
  cache_root: {tmp_path / "platform" / "cache"}
  protected_target_file: {tmp_path / "platform" / "protected" / "target.json"}
  source_location: {checkout}
  source_repository: {PLATFORM_REPOSITORY}
  source_commit: "{head}"
  storage: {{endpoint: "{s3_server.endpoint}", url_style: path, use_ssl: false,
            key_id_env: DPONE_TEST_S3_KEY_ID, secret_env: DPONE_TEST_S3_SECRET}}
"""


def _upload_authority(s3_server, bucket: str, settings: ReleaseSettings, tmp_path: Path) -> None:
    placed = _place_authority(settings, tmp_path / "signed")
    client = s3_server.client()
    for key, data in placed.items():
        client.put_object(Bucket=bucket, Key=f"platform/authority/{key}", Body=data)


@pytest.mark.s3
def test_configured_s3_platform_reads_authority_and_publishes_through_s3(monkeypatch, tmp_path, s3_server, s3_bucket):
    settings = _configure(monkeypatch, tmp_path, _s3_platform(tmp_path, s3_server, s3_bucket))
    _upload_authority(s3_server, s3_bucket, settings, tmp_path)

    result = _run()

    assert result.success, step_failures(result)
    found = materializations(result)
    assert found["development_policy"]["synthetic"] is False
    assert found["published_release"]["registry"] == f"s3://{s3_bucket}/platform/registry/"
    release_hex = found["installed_release"]["release_id"].removeprefix("sha256:")
    keys = s3_server.keys(s3_bucket, "platform/registry/")
    assert f"platform/registry/releases/{release_hex}.json" in keys
    assert len(keys) == found["published_release"]["objects_written"]
    assert s3_server.keys(s3_bucket, "platform/authority/") == sorted(
        f"platform/authority/{k}" for k in AUTHORITY_FILES
    )
    secrets = [s3_server.key_id, s3_server.secret]
    assert_no_private_values(_metadata_values(result), private=[str(tmp_path), *secrets])
    assert not any(secret in repr(settings) or secret in repr(load_config()) for secret in secrets)


@pytest.mark.s3
def test_an_unset_s3_credential_stops_the_run_naming_the_variable_not_a_value(
    monkeypatch, tmp_path, s3_server, s3_bucket
):
    settings = _configure(monkeypatch, tmp_path, _s3_platform(tmp_path, s3_server, s3_bucket))
    _upload_authority(s3_server, s3_bucket, settings, tmp_path)
    monkeypatch.delenv("DPONE_TEST_S3_SECRET")

    result = _run()

    assert not result.success
    failure = step_failures(result)["development_policy"]
    assert "config.secret_missing" in failure and "DPONE_TEST_S3_SECRET" in failure
    assert s3_server.key_id not in failure and s3_server.secret not in failure
    assert s3_server.keys(s3_bucket, "platform/registry/") == []


def test_synthetic_signing_never_targets_an_s3_authority_location(_isolated_state):
    embedded = release_settings(load_config()).model_dump()
    with pytest.raises(ValueError, match="never into S3"):
        ReleaseSettings.model_validate({**embedded, "authority_location": "s3://bucket/authority/"})
    configured = ReleaseSettings.model_validate(
        {**embedded, "authority_location": "s3://bucket/a/", "synthetic": False}
    )
    assert configured.authority_is_s3


def test_resource_descriptions_name_the_configured_platform_without_private_paths(monkeypatch, tmp_path):
    _configure(monkeypatch, tmp_path, _directory_platform(tmp_path))
    descriptions = {key: resource.description for key, resource in location_definitions().resources.items()}
    assert "(configured platform)" in descriptions["authority_platform"]
    assert "SYNTHETIC" not in descriptions["authority_platform"]
    assert_no_private_values(descriptions.values(), private=[str(tmp_path)])
