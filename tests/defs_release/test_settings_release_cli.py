"""`dpone release show|verify` on an S3 registry commit object, with the configured platform's storage."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.release.delivery.object_stores import S3Store
from dpone_dagster.release.delivery.registry import ReleaseRegistry, commit_key
from tests.release.fabricated import SyntheticTarget, synthetic_release

pytestmark = pytest.mark.s3


@pytest.fixture
def s3_published(s3_server, s3_bucket, tmp_path, monkeypatch):
    """A release published to `s3://<bucket>/team/registry/` and a dpone.yaml naming its storage."""
    target = SyntheticTarget()
    release = synthetic_release(target)
    bundle, authority = release.bundle, release.authority
    registry = ReleaseRegistry(S3Store(s3_server.client(), s3_bucket, "team/registry"))
    registry.publish(
        bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
    )
    config = tmp_path / "dpone.yaml"
    config.write_text(
        f"""release:
  authority_location: s3://{s3_bucket}/team/authority/
  registry_location: s3://{s3_bucket}/team/registry/
  cache_root: cache
  protected_target_file: protected/target.json
  source_location: dbt_project_synthetic
  source_repository: example.invalid/team/analytics
  source_commit: "{"ab" * 20}"
  storage: {{endpoint: "{s3_server.endpoint}", url_style: path, use_ssl: false,
            key_id_env: DPONE_TEST_S3_KEY_ID, secret_env: DPONE_TEST_S3_SECRET}}
""",
        encoding="utf-8",
    )
    monkeypatch.setenv("DPONE_CONFIG", str(config))
    return f"s3://{s3_bucket}/team/registry/{commit_key(bundle.release_id)}", bundle


def test_show_and_verify_read_an_s3_commit_object_without_writing(s3_published, s3_server, s3_bucket):
    location, bundle = s3_published
    before = s3_server.keys(s3_bucket)
    runner = CliRunner()

    shown = runner.invoke(app, ["release", "show", "--json", location])
    verified = runner.invoke(app, ["release", "verify", location])

    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert (data["kind"], data["release_id"], data["members"]) == ("published", bundle.release_id, len(bundle.members))
    assert verified.exit_code == 0, verified.output
    assert verified.output.startswith(f"verified published release {bundle.release_id}")
    assert s3_server.keys(s3_bucket) == before


def test_an_altered_s3_blob_is_refused_with_its_code(s3_published, s3_server, s3_bucket):
    location, _ = s3_published
    client = s3_server.client()
    blob = next(key for key in s3_server.keys(s3_bucket, "team/registry/") if "/releases/" not in key)
    client.put_object(
        Bucket=s3_bucket, Key=blob, Body=client.get_object(Bucket=s3_bucket, Key=blob)["Body"].read() + b" "
    )

    result = CliRunner().invoke(app, ["release", "verify", location])

    assert result.exit_code == 1
    assert result.output.startswith("refused: [release.")


def test_missing_release_bucket_and_credentials_are_refused_with_codes(s3_published, s3_server, monkeypatch):
    location, bundle = s3_published
    runner = CliRunner()
    absent = location.replace(bundle.release_id[7:], "0" * 64)
    assert "[release.not_found]" in runner.invoke(app, ["release", "verify", absent]).output

    no_bucket = runner.invoke(
        app, ["release", "verify", "s3://no-such-bucket-x/r/" + location.split("/team/registry/")[1]]
    )
    assert no_bucket.exit_code == 1 and "[release.registry_unavailable]" in no_bucket.output

    monkeypatch.delenv("DPONE_TEST_S3_SECRET")
    unset = runner.invoke(app, ["release", "verify", location])
    assert unset.exit_code == 1 and "[config.secret_missing]" in unset.output
    assert s3_server.secret not in unset.output and s3_server.key_id not in unset.output


def test_an_s3_location_that_is_not_a_commit_object_is_a_usage_error(s3_published):
    location, _ = s3_published
    result = CliRunner().invoke(app, ["release", "show", location.rsplit("/releases/", 1)[0] + "/"])
    assert result.exit_code == 2
