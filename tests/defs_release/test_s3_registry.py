"""Publication through the platform's boto3 S3 client into a real (moto) S3 server over HTTP."""

from __future__ import annotations

import pytest

from dpone_dagster.config import StorageConfig
from dpone_dagster.defs.release.definitions import build_definitions

from .conftest import materializations, step_failures

pytestmark = pytest.mark.s3


def test_publish_and_install_through_an_s3_registry(released, s3_server, s3_bucket, env_of, monkeypatch):
    env_of(released)
    settings = released.settings.model_copy(
        update={
            "registry_location": f"s3://{s3_bucket}/dpone/registry",
            "storage": StorageConfig(
                endpoint=s3_server.endpoint,
                use_ssl=False,
                url_style="path",
                key_id_env="DPONE_TEST_S3_KEY_ID",
                secret_env="DPONE_TEST_S3_SECRET",
            ),
        }
    )
    # The whole job: a composed release is held only in its run's memory (nothing is pickled into
    # DAGSTER_HOME), so publishing to another registry composes it again in the same run.
    job = build_definitions(settings).resolve_job_def("release_job")
    result = job.execute_in_process(instance=released.instance, raise_on_error=False)
    assert result.success, step_failures(result)
    found = materializations(result)
    release_hex = found["published_release"]["release_id"].removeprefix("sha256:")
    assert found["published_release"]["already_published"] is False
    assert found["published_release"]["registry"] == f"s3://{s3_bucket}/dpone/registry"
    keys_in_bucket = s3_server.keys(s3_bucket, "dpone/registry/")
    assert f"dpone/registry/releases/{release_hex}.json" in keys_in_bucket
    assert len(keys_in_bucket) == found["published_release"]["objects_written"]
    assert found["installed_release"]["release_id"] == found["published_release"]["release_id"]
