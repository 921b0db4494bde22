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
    lake = LakeConfig(name="main", catalog="c.ducklake", data_path="s3://b/",
                      storage={"secret_env": "LAKE_SECRET"})
    assert "super-secret-value" not in repr(lake)
    assert "super-secret-value" not in lake.model_dump_json()
