"""Fixtures for the dbt tests (helpers live in `dbt_lakes.py`, a name no other test folder uses)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def prepared_manifest() -> None:
    from dpone_dagster.defs.dbt.project import prepare_manifest

    prepare_manifest()


@pytest.fixture(scope="module")
def module_state_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dbt_lake")
