"""Golden vectors for the identities and documents the release path persists.

A release's identity, its constituent ids, selection fingerprints, the registry's commit object and
the release cache's deployment record, pointer, audit line and activation intent are all written to
storage and compared later by digest. These values must never change; if this test fails, a
persisted identity changed, which old registries and caches would no longer recognise.

One change was made on purpose: the deployment record became `dpone.deployment-record.v2`, which adds
`integrity_subject` (issue 20 item 6). Its bytes and digest are new; the v1 record of the same
installation (the subject removed, schema v1) is byte for byte the old golden file, and v1 records
are still read. No release, constituent, commit, pointer, audit or receipt identity changed.
"""

from __future__ import annotations

import hashlib

from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.canonical import dumps, loads
from dpone_dagster.contracts.release_records import (
    ActivationIntent,
    AuditEntry,
    CurrentPointer,
    DeploymentRecord,
    DeploymentRecordV1,
)
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.registry import commit_for

RELEASE_ID = "sha256:0c2ae208ea6e9f978d40f63526968f439c2f2ba0786e4e54127ca73279c16dad"
ORDINARY_CONSTITUENT_IDS = [
    "sha256:601ad2b27e2ed7067e31f97937e34dded0d4cdf263decb1741eb480269afd96d",
    "sha256:6a3e7693627b6cd30087cfe2dcc09026f766b1f8e4e6bf3885fc252994d21514",
]
SELECTION_FINGERPRINTS = ["sha256:c2a848cc3288dded0ffdeed7f84499cf908c520ed13ce91afa68c3930a000aa3"]
COMMIT_DIGEST = "sha256:57dafe0826139b22eec24f9a25b506b72062620d44610af79cee8268b1129e6b"
CACHE_FILES = {
    "audit.log": (
        "e56f2014abbc15242f6232f889d3c022f0d4dc64ff96016cbdebca2dab00b6d6",
        AuditEntry,
        "sha256:5781fb44dbf9e2bd32ab420f1dd119b0e4fac47133434589ec6c5435c21d37d8",
    ),
    "current": (
        "01667db7219f0c76b700168eec91fa4e6970a146fc98ebba7980f780b8374f49",
        CurrentPointer,
        "sha256:340d48b8734d527fd3e8ac85f11c599d0bce5e882d935ef7f954b20528ae55f3",
    ),
    f"deployments/{RELEASE_ID.removeprefix('sha256:')}/deployment.json": (
        "945f385fe5468554c82707db8c5ac82a5af570c8900ddd4e6ba971a97954f6e7",
        DeploymentRecord,
        "sha256:bc6d71f65179c5aa9a51799bbc16090c369623f0b1593dbc1bc0aa2620ec2122",
    ),
}
V1_DEPLOYMENT_RECORD = (
    "d797f9c0c2414d63ecb1d4184265d07a4d4bd03f45d340402b76f28f7d58cdba",
    "sha256:35df09ec63ae30ebea9b086f5389ad04d584dc28ecd15dae3b37b2d4eab0724b",
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_release_identity_constituents_selection_and_commit_are_stable(release) -> None:
    bundle = release.bundle
    assert bundle.release_id == RELEASE_ID
    assert [item.constituent_id for item in bundle.parent.ordinary_constituents] == ORDINARY_CONSTITUENT_IDS
    assert [
        project.selection_fingerprint for document in bundle.native for project in document.projects
    ] == SELECTION_FINGERPRINTS
    assert commit_for(bundle).document_digest() == COMMIT_DIGEST


def test_release_cache_documents_are_byte_stable(tmp_path, target, release) -> None:
    cache = ReleaseCache(tmp_path, admission=target.issuer, clock=target.clock)
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    cache.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    for path, (file_sha, model, document_digest) in CACHE_FILES.items():
        data = (tmp_path / path).read_bytes()
        assert _sha(data) == file_sha, path
        assert parse_document(model, data.rstrip(b"\n")).document_digest() == document_digest, path
    record = loads((tmp_path / "deployments" / RELEASE_ID.removeprefix("sha256:") / "deployment.json").read_bytes())
    del record["integrity_subject"]
    v1 = dumps({**record, "schema": "dpone.deployment-record.v1"})
    assert (_sha(v1), parse_document(DeploymentRecordV1, v1).document_digest()) == V1_DEPLOYMENT_RECORD


def test_activation_intent_is_byte_stable() -> None:
    intent = ActivationIntent(
        action="rollback",
        release_id="sha256:" + "1" * 64,
        deployment_id="synthetic-dev:" + "1" * 64,
        previous_release_id="sha256:" + "2" * 64,
        audit_sequence=3,
        receipt_digest="sha256:" + "3" * 64,
        prepared_at="2030-01-01T00:00:00Z",
    )
    assert _sha(intent.canonical_bytes()) == "bb720bff023e8e535b5043a499c4cdfeaa1fb38a6f771f847e6e19834ffde4a9"
    assert intent.document_digest() == "sha256:b5cd67a7d2c588fde74e16f5b338e6a8916a1ba447dccb655f46c3946bf4a1e6"
