"""Typed configuration: dpone.yaml + environment overrides, credentials only by reference."""

from pathlib import Path

import pytest

from dpone_dagster.config import LakeConfig, load_config, resolve_secret
from dpone_dagster.errors import ConfigError


def _write(root: Path, text: str) -> None:
    (root / "dpone.yaml").write_text(text, encoding="utf-8")


def test_embedded_default_needs_no_file(tmp_path):
    config = load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    lake = config.lake("main")
    assert config.workspace == "prod"
    assert config.state_path == tmp_path / ".dpone"
    assert lake.catalog_kind == "duckdb"
    assert lake.catalog.startswith(str(tmp_path / ".dpone"))
    assert config.control_store.startswith("sqlite:///")


def test_yaml_and_environment_overrides(tmp_path):
    _write(
        tmp_path,
        """
state_dir: state
lakes:
  - name: main
    catalog: "postgres:host=127.0.0.1 port=5432 dbname=lake user=dl"
    catalog_password_env: LAKE_PG_PASSWORD
    data_path: s3://bucket/lake/
    storage: {endpoint: "127.0.0.1:9000", url_style: path, use_ssl: false,
              key_id_env: LAKE_KEY, secret_env: LAKE_SECRET}
    attach_args: {ENCRYPTED: true}
""",
    )
    env = {
        "DPONE_PROJECT_ROOT": str(tmp_path),
        "DPONE_WORKSPACE": "wm-fork-x",
        "DPONE_LAKE_MAIN_DATA_PATH": "s3://other/lake/",
    }
    config = load_config(env)
    lake = config.lake()
    assert config.state_path == tmp_path / "state"
    assert config.workspace == "wm-fork-x"
    assert lake.catalog_kind == "postgres"
    assert lake.data_path == "s3://other/lake/"
    assert lake.is_s3 and lake.storage.key_id_env == "LAKE_KEY"
    assert lake.attach_args == {"ENCRYPTED": True}


@pytest.mark.parametrize(
    "catalog",
    [
        "postgres:host=h dbname=d user=u password=hunter2",
        "postgresql://u:hunter2@h/d",
    ],
)
def test_inline_catalog_passwords_are_refused_without_echoing_them(tmp_path, catalog):
    _write(tmp_path, f'lakes: [{{name: main, catalog: "{catalog}", data_path: /tmp/x/}}]\n')
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    assert "hunter2" not in str(info.value)
    assert info.value.code == "config.invalid"


def test_storage_secrets_must_be_env_names_not_values(tmp_path):
    _write(
        tmp_path,
        "lakes: [{name: main, catalog: c.ducklake, data_path: s3://b/p/,"
        " storage: {secret_env: 'wJalrXUtnFEMI/K7MDENG'}}]\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    assert "wJalrXUtnFEMI" not in str(info.value)


def test_unknown_fields_and_bad_yaml_fail_closed(tmp_path):
    _write(tmp_path, "lakes: [{name: main, catalog: c, data_path: d, surprise: 1}]\n")
    with pytest.raises(ConfigError):
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    _write(tmp_path, "lakes: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    assert "line" in info.value.message


def test_override_for_undefined_lake_is_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path), "DPONE_LAKE_GHOST_CATALOG": "x"})
    assert info.value.code == "config.unknown_lake"


def test_secret_resolution_reads_the_reference_at_use_time():
    assert resolve_secret("K", {"K": "v"}) == "v"
    with pytest.raises(ConfigError) as info:
        resolve_secret("K", {})
    assert info.value.code == "config.secret_missing"


def test_lake_repr_never_contains_secret_values(monkeypatch):
    monkeypatch.setenv("LAKE_SECRET", "super-secret-value")
    lake = LakeConfig(name="main", catalog="c.ducklake", data_path="s3://b/", storage={"secret_env": "LAKE_SECRET"})
    assert "super-secret-value" not in repr(lake)
    assert "super-secret-value" not in lake.model_dump_json()


_RELEASE = """
release:
  authority_location: s3://grants/dev/
  registry_location: {registry}
  cache_root: cache
  protected_target_file: protected/target.json
  source_location: checkout
  source_repository: example.invalid/team/flows
  source_commit: "{commit}"
  storage: {{key_id_env: REL_KEY, secret_env: REL_SECRET}}
"""
_COMMIT = "0f" * 20


def _release(tmp_path: Path, *, registry: str = "registry", commit: str = _COMMIT, **env: str):
    _write(tmp_path, _RELEASE.format(registry=registry, commit=commit))
    return load_config({"DPONE_PROJECT_ROOT": str(tmp_path), **env})


def test_without_a_release_section_there_is_no_configured_platform(tmp_path):
    assert load_config({"DPONE_PROJECT_ROOT": str(tmp_path)}).release is None


def test_release_section_keeps_locations_and_resolves_local_paths_under_the_root(tmp_path):
    config = _release(tmp_path)
    release = config.release
    assert release.source_commit == _COMMIT and release.storage.secret_env == "REL_SECRET"
    assert config.project_location(release.authority_location) == "s3://grants/dev/"
    assert config.project_location(release.registry_location) == str(tmp_path / "registry")
    assert config.project_path(release.protected_target_file) == tmp_path / "protected" / "target.json"
    assert config.project_path(Path("/abs/cache")) == Path("/abs/cache")


def test_release_source_commit_is_overridden_from_the_environment(tmp_path):
    config = _release(tmp_path, DPONE_RELEASE_SOURCE_COMMIT="a1" * 20)
    assert config.release.source_commit == "a1" * 20


def test_release_commit_override_without_a_release_section_is_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path), "DPONE_RELEASE_SOURCE_COMMIT": "a1" * 20})
    assert info.value.code == "config.release_missing"


@pytest.mark.parametrize(
    ("registry", "commit", "problem"),
    [
        ("https://example.invalid/registry", _COMMIT, "release.registry_location"),
        ("s3:///no-bucket", _COMMIT, "release.registry_location"),
        ("s3://grants/dev", _COMMIT, "the authority location and the registry"),
        ("registry", "main", "release.source_commit"),
        ("registry", "0F" * 20, "release.source_commit"),
    ],
)
def test_invalid_release_sections_are_refused_with_the_field_named(tmp_path, registry, commit, problem):
    with pytest.raises(ConfigError) as info:
        _release(tmp_path, registry=registry, commit=commit)
    assert info.value.code == "config.invalid"
    assert problem in info.value.message


def test_release_section_is_closed_and_storage_secrets_are_names(tmp_path):
    _write(tmp_path, _RELEASE.format(registry="registry", commit=_COMMIT) + "  signing_key: abc\n")
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    assert "release.signing_key" in info.value.message
    _write(tmp_path, _RELEASE.format(registry="registry", commit=_COMMIT).replace("REL_SECRET", "'AKIA/xyz+secret'"))
    with pytest.raises(ConfigError) as info:
        load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    assert "AKIA/xyz" not in str(info.value)


def test_release_repr_never_contains_secret_values(tmp_path, monkeypatch):
    monkeypatch.setenv("REL_SECRET", "release-secret-value")
    config = _release(tmp_path)
    assert "release-secret-value" not in repr(config)
    assert "release-secret-value" not in config.model_dump_json()
