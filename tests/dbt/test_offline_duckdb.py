"""No DuckDB extension is ever fetched: not by our connections, not by the ones dbt-duckdb opens.

The proof has two halves: the settings of a connection opened exactly the way dbt-duckdb opens it
(from the real profile, through its `LocalEnvironment` and our plugin), and a dbt run that starts
with an empty extension directory, succeeds, and leaves the directory empty.
"""

from __future__ import annotations

import pytest
import yaml
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup

OFFLINE_SETTINGS = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


def _profile_credentials():
    from dbt.adapters.duckdb.credentials import DuckDBCredentials

    profile = yaml.safe_load((DBT_PROJECT_DIR / "profiles.yml").read_text(encoding="utf-8"))
    output = dict(profile["dbt_project_synthetic"]["outputs"]["lake"])
    output.pop("type")
    output.pop("threads")
    return DuckDBCredentials.from_dict(output)


@pytest.fixture
def setup(tmp_path):
    return LakeSetup(tmp_path / "state")


def test_dbt_duckdb_connection_is_offline_and_lake_attached(setup):
    from dbt.adapters.duckdb.environments.local import LocalEnvironment

    with setup.applied():
        environment = LocalEnvironment(_profile_credentials())
        handle = environment.handle()
        try:
            cursor = handle.cursor()
            settings = dict(
                cursor.execute(
                    "SELECT name, value FROM duckdb_settings() WHERE name IN (?, ?, ?)",
                    [*OFFLINE_SETTINGS, "extension_directory"],
                ).fetchall()
            )
            extensions = {
                name: (installed, path)
                for name, installed, path in cursor.execute(
                    "SELECT extension_name, installed, install_path FROM duckdb_extensions() "
                    "WHERE extension_name IN ('ducklake', 'httpfs', 'postgres_scanner') AND loaded"
                ).fetchall()
            }
            databases = {row[0] for row in cursor.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
        finally:
            handle.close()
            environment.close()
    assert {k: settings[k] for k in OFFLINE_SETTINGS} == OFFLINE_SETTINGS
    assert settings["extension_directory"] == str(setup.extension_directory)
    assert set(extensions) == {"ducklake"}  # embedded lake: postgres_scanner / httpfs are loaded only on demand
    assert all(not installed for installed, _ in extensions.values())
    assert "lake_main" in databases


def test_a_dbt_run_with_an_empty_extension_directory_installs_nothing(setup):
    setup.extension_directory.mkdir(parents=True)
    setup.dbt("run", "--select", "raw_customers")
    assert setup.rows("SELECT count(*) FROM lake_main.raw.raw_customers") == [(2000,)]
    assert list(setup.extension_directory.rglob("*")) == []


def test_plugin_refuses_a_profile_whose_database_is_not_the_lake_alias(setup):
    from dbt.adapters.duckdb.environments.local import LocalEnvironment

    from dpone_dagster.lake.dbt_plugin import ProfileMismatchError

    credentials = _profile_credentials()
    credentials.database = "somewhere_else"
    with setup.applied():
        environment = LocalEnvironment(credentials)
        with pytest.raises(ProfileMismatchError) as refused:
            environment.handle()
        environment.close()
    assert refused.value.code == "lake.dbt_profile_mismatch"
    assert "lake_main" in refused.value.message
