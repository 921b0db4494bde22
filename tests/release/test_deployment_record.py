"""Issue 20 item 6: deployment.json's authority fields are inside its integrity subject.

An installed deployment's record (`dpone.deployment-record.v2`) binds `authority_expires_at`,
`revocation_epoch` and `installed_at` with every other field: an edited record refuses to load, so
`dpone release show` can never report the edited values. A record written before v2 still loads as
evidence, says its authority fields are unbound, and cannot be activated again.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.canonical import dumps, loads
from dpone_dagster.contracts.release_records import DeploymentRecord, deployment_subject
from dpone_dagster.errors import DponeError
from dpone_dagster.release.delivery.install import ReleaseCache

EDITS = {
    "authority_expires_at": "2027-01-06T09:00:00Z",
    "revocation_epoch": 0,  # replaced below by the recorded epoch + 3
    "installed_at": "2026-01-05T09:30:00Z",
}


@pytest.fixture
def installed(tmp_path, target, release):
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    return cache, cache.root / "deployments" / release.bundle.release_id.removeprefix("sha256:")


def _edit(directory, field: str, value) -> None:
    path = directory / "deployment.json"
    record = loads(path.read_bytes())
    record[field] = record[field] + 3 if field == "revocation_epoch" else value
    path.chmod(0o600)
    path.write_bytes(dumps(record))


def test_the_written_record_binds_its_authority_fields(installed, release):
    cache, _ = installed
    record = cache.load(release.bundle.release_id).record
    assert isinstance(record, DeploymentRecord) and record.authority_bound
    assert record.authority_expires_at == release.authority.expires_at
    assert record.integrity_subject == deployment_subject(record.model_dump(mode="json", by_alias=True))


@pytest.mark.parametrize("field", sorted(EDITS))
def test_an_edited_authority_field_refuses_to_load(installed, release, field):
    cache, directory = installed
    _edit(directory, field, EDITS[field])
    with pytest.raises(DponeError) as raised:
        cache.load(release.bundle.release_id)
    assert raised.value.code == "release.integrity_mismatch"


@pytest.mark.parametrize("field", sorted(EDITS))
def test_show_never_reports_an_edited_value(installed, field):
    _, directory = installed
    _edit(directory, field, EDITS[field])
    shown = CliRunner().invoke(app, ["release", "show", "--json", str(directory)])
    assert shown.exit_code == 1
    assert "release.integrity_mismatch" in shown.output
    assert "2027-01-06" not in shown.output and "09:30:00" not in shown.output


def test_a_recomputed_subject_cannot_claim_installation_after_expiry(installed, release):
    """Even a writer who recomputes the subject cannot record an install after its authority expired."""
    _, directory = installed
    record = loads((directory / "deployment.json").read_bytes())
    record["installed_at"] = record["authority_expires_at"]
    record["integrity_subject"] = deployment_subject(record)
    with pytest.raises(ContractError):
        DeploymentRecord.from_value(record)


def test_a_v1_record_still_loads_as_evidence_but_is_never_activated(installed, target, release):
    cache, directory = installed
    record = loads((directory / "deployment.json").read_bytes())
    del record["integrity_subject"]
    record["schema"] = "dpone.deployment-record.v1"
    (directory / "deployment.json").chmod(0o600)
    (directory / "deployment.json").write_bytes(dumps(record))
    loaded = cache.load(release.bundle.release_id)
    assert loaded.record.authority_bound is False
    assert loaded.bundle.release_id == release.bundle.release_id
    shown = CliRunner().invoke(app, ["release", "show", "--json", str(directory)])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["authority_fields"] == "unverified: dpone.deployment-record.v1, install again to bind them"
    assert data["authority_expired"] is True and "authority_expires_at" not in data
    with pytest.raises(DponeError) as raised:
        cache.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "release.integrity_mismatch"
    assert cache.current() is None
