"""Fixtures for the dbt tests (helpers live in `dbt_lakes.py`, a name no other test folder uses)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def prepared_manifest() -> None:
    from dpone_dagster.integration.dbt.project import prepare_manifest

    prepare_manifest()


@pytest.fixture(scope="session")
def built_prod_lake(tmp_path_factory, prepared_manifest):
    """The embedded lake with every dbt asset materialized in `prod`, once per session.

    Shared by the embedded-lake and fork tests; a test that writes to it writes only through
    dpone itself (a repeated demo run, or a fork that must leave prod untouched).
    """
    from dbt_lakes import LakeSetup, materialize_synthetic_dbt

    setup = LakeSetup(tmp_path_factory.mktemp("prod_lake"))
    return setup, materialize_synthetic_dbt(setup)
