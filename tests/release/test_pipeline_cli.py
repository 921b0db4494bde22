"""`dpone release show` / `verify`: read-only, on installed, published and exported releases."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry, commit_key
from tests.release.fabricated import SyntheticTarget, synthetic_release


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    root = tmp_path_factory.mktemp("delivered")
    target = SyntheticTarget()
    release = synthetic_release(target)
    bundle, authority = release.bundle, release.authority
    registry = ReleaseRegistry(LocalDirectoryStore(root / "registry"))
    registry.publish(
        bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
    )
    cache = ReleaseCache(root / "cache", admission=target.issuer, clock=target.clock)
    cache.materialize(bundle, authority=authority, receipt=target.materialization(bundle, authority))
    exported = root / "exported"
    for path, data in bundle.members.items():
        (exported / path).parent.mkdir(parents=True, exist_ok=True)
        (exported / path).write_bytes(data)
    return {
        "release_id": bundle.release_id,
        "installed": cache.root / "deployments" / bundle.release_id[7:],
        "published": root / "registry" / commit_key(bundle.release_id),
        "bundle": exported,
    }


@pytest.mark.parametrize("kind", ["installed", "published", "bundle"])
def test_show_and_verify_every_kind(delivered, kind):
    runner = CliRunner()
    shown = runner.invoke(app, ["release", "show", "--json", str(delivered[kind])])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert (data["kind"], data["release_id"], data["delivery_status"]) == (
        kind,
        delivered["release_id"],
        "delivered_dormant",
    )
    assert data["native_projects"] == {"shop": 2} and {w["pack_id"] for w in data["ordinary_workloads"]} == {
        "export",
        "transfer",
    }
    verified = runner.invoke(app, ["release", "verify", str(delivered[kind])])
    assert verified.exit_code == 0 and delivered["release_id"] in verified.output


def test_verify_reports_a_tampered_member_with_its_code(delivered, tmp_path):
    import shutil

    copy = tmp_path / delivered["installed"].name
    shutil.copytree(delivered["installed"], copy)
    victim = next(p for p in (copy / "members" / "sources").rglob("*") if p.is_file())
    victim.write_bytes(victim.read_bytes() + b" ")
    result = CliRunner().invoke(app, ["release", "verify", str(copy)])
    assert result.exit_code == 1
    assert "release.integrity_mismatch" in result.output and str(tmp_path) not in result.output


def test_an_unrecognised_path_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["release", "show", str(tmp_path)])
    assert result.exit_code == 2
