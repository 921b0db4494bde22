"""Lake configurations for tests: the embedded default and PostgreSQL catalog + moto S3 storage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dpone_dagster.config import DponeConfig, LakeConfig, StorageConfig, load_config
from dpone_dagster.control.store import reset_store_cache


@dataclass(frozen=True)
class LakeEnv:
    """One test lake setup: the config plus ways to look at its physical storage."""

    kind: str
    config: DponeConfig
    list_files: Callable[[str], list[str]]
    s3_bucket: str | None = None

    @property
    def lake(self) -> LakeConfig:
        return self.config.lake("main")


def embedded_env(state_dir: Path) -> LakeEnv:
    base = load_config()
    lake = base.embedded_main_lake().model_copy(update={"attach_args": {"DATA_INLINING_ROW_LIMIT": 0}})
    config = base.model_copy(update={"lakes": (lake,)})

    def list_files(prefix: str) -> list[str]:
        root = Path(prefix)
        return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []

    return LakeEnv("embedded", config, list_files)


def pg_s3_env(postgres_server, database: str, s3_server, bucket: str) -> LakeEnv:
    base = load_config()
    lake = LakeConfig(
        name="main",
        catalog="postgres:" + postgres_server.dsn(database),
        data_path=f"s3://{bucket}/lakes/main/",
        storage=StorageConfig(
            endpoint=s3_server.endpoint,
            url_style="path",
            use_ssl=False,
            region=s3_server.region,
            key_id_env="DPONE_TEST_S3_KEY_ID",
            secret_env="DPONE_TEST_S3_SECRET",
        ),
        attach_args={"DATA_INLINING_ROW_LIMIT": 0},
    )
    config = base.model_copy(
        update={"lakes": (lake,), "control_store_url": postgres_server.url(database)}
    )

    def list_files(prefix: str) -> list[str]:
        assert prefix.startswith(f"s3://{bucket}/")
        key_prefix = prefix[len(f"s3://{bucket}/") :]
        return [f"s3://{bucket}/{k}" for k in s3_server.keys(bucket, key_prefix)]

    return LakeEnv("pg_s3", config, list_files, s3_bucket=bucket)


@pytest.fixture(params=["embedded", "pg_s3"])
def lake_env(request, _isolated_state) -> LakeEnv:
    reset_store_cache()
    if request.param == "embedded":
        return embedded_env(_isolated_state)
    postgres_server = request.getfixturevalue("postgres_server")
    database = request.getfixturevalue("pg_database")
    s3_server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")
    return pg_s3_env(postgres_server, database, s3_server, bucket)
