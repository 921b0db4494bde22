"""Lake fixtures: `lake_env` runs a test on the embedded default AND on PostgreSQL + S3;
`embedded_lake` / `pg_s3_lake` pin one backend for tests whose point does not depend on it."""

from __future__ import annotations

import pytest

from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.workspaces.service import Workspaces

from .lakes import LakeEnv, embedded_env, pg_s3_env


def _pg_s3(request) -> LakeEnv:
    return pg_s3_env(
        request.getfixturevalue("postgres_server"),
        request.getfixturevalue("pg_database"),
        request.getfixturevalue("s3_server"),
        request.getfixturevalue("s3_bucket"),
    )


@pytest.fixture(params=["embedded", "pg_s3"])
def lake_env(request, _isolated_state) -> LakeEnv:
    reset_store_cache()
    return embedded_env(_isolated_state) if request.param == "embedded" else _pg_s3(request)


@pytest.fixture
def embedded_lake(_isolated_state) -> LakeEnv:
    reset_store_cache()
    return embedded_env(_isolated_state)


@pytest.fixture
def pg_s3_lake(request, _isolated_state) -> LakeEnv:
    reset_store_cache()
    return _pg_s3(request)


@pytest.fixture
def service(request) -> Workspaces:
    """The workspace service over whichever lake fixture (`lake_env` or `embedded_lake`) the test uses."""
    env = request.getfixturevalue(next(n for n in ("lake_env", "embedded_lake") if n in request.fixturenames))
    return Workspaces(env.config)
