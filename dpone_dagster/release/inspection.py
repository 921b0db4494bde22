"""Inspecting a delivered development release, read-only: `dpone release show/verify` and `api.inspect_release`.

`inspect_release(location)` opens an installed deployment folder, a registry commit object (a local
`releases/<hex>.json` or `s3://bucket/prefix/releases/<hex>.json`) or a release member directory and
verifies every byte on the way (`open_bundle`, `read_deployment`, `ReleaseRegistry.fetch`);
`release_summary` is what `show` prints.

What a reader could get wrong: inspection never turns the metadata a release carries into authority:
nothing here publishes, installs, activates or runs; an S3 location is read with the storage
settings the caller passes (the configured release platform's, for the CLI).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dpone_dagster.config import StorageConfig
from dpone_dagster.contracts.bounds import parse_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.release_records import DeploymentRecord
from dpone_dagster.release.build.bundle import PARENT_PATH, ReleaseBundle, open_bundle
from dpone_dagster.release.delivery.deployments import read_deployment
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import RELEASES, ReleaseRegistry
from dpone_dagster.release.platform.target import object_store


class InspectionError(CodedError):
    codes = {
        "release.not_a_release_location": (
            "The location is not an installed deployment folder, a registry commit "
            "object (releases/<hex>.json, local or s3://) or a release member "
            "directory."
        ),
    }


@dataclass(frozen=True)
class Inspected:
    kind: str
    bundle: ReleaseBundle
    record: DeploymentRecord | None


_S3_COMMIT = re.compile(r"^(s3://[^/]+/(?:.*/)?)" + re.escape(RELEASES) + r"([0-9a-f]{64})\.json$")


def inspect_release(location: str | Path, *, storage: StorageConfig | None = None) -> Inspected:
    """Open a location as an installed deployment, a registry commit or a member directory, fully verified."""
    if str(location).startswith("s3://"):
        return _inspect_s3_commit(str(location), storage)
    path = Path(location)
    if path.is_dir() and (path / "deployment.json").is_file():
        installed = read_deployment(path, "sha256:" + path.name)
        return Inspected("installed", installed.bundle, installed.record)
    if path.is_file() and path.parent.name == RELEASES.rstrip("/") and path.name.endswith(".json"):
        registry = ReleaseRegistry(LocalDirectoryStore(path.parent.parent), name="local registry")
        return Inspected("published", registry.fetch("sha256:" + path.name.removesuffix(".json")), None)
    if path.is_dir() and (path / PARENT_PATH).is_file():
        members = {item.relative_to(path).as_posix(): item.read_bytes() for item in path.rglob("*") if item.is_file()}
        return Inspected("bundle", open_bundle(members), None)
    raise InspectionError(
        "release.not_a_release_location", "not an installed deployment, a registry commit object or a release directory"
    )


def _inspect_s3_commit(location: str, storage: StorageConfig | None) -> Inspected:
    """Fetch and verify a commit object of an S3 registry; reads only."""
    match = _S3_COMMIT.match(location)
    if match is None:
        raise InspectionError(
            "release.not_a_release_location",
            "an s3:// location must name a registry commit object: s3://bucket/prefix/releases/<hex>.json",
        )
    root, release_hex = match.groups()
    registry = ReleaseRegistry(object_store(root, storage), name="S3 registry")
    return Inspected("published", registry.fetch("sha256:" + release_hex), None)


def release_summary(inspected: Inspected, now: datetime) -> dict[str, object]:
    """What `dpone release show` prints: identity, authority digests, membership counts, install record."""
    bundle, parent = inspected.bundle, inspected.bundle.parent
    data: dict[str, object] = {
        "kind": inspected.kind,
        "release_id": bundle.release_id,
        "family": parent.authority_family,
        "profile": parent.profile,
        "trust_tier": parent.trust_tier,
        "delivery_status": parent.delivery_status,
        "execution": "none: development releases are delivered dormant",
        "policy_digest": parent.policy_digest,
        "grant_digest": parent.grant_digest,
        "source_commit": parent.source_commit,
        "source_snapshot_digest": parent.source_snapshot_digest,
        "native_projects": {doc.project_name: len(doc.nodes) for native in bundle.native for doc in native.projects},
        "ordinary_workloads": [
            {"pack_id": w.pack_id, "selector": w.selector, "dag_id": w.dag_id, "pre_hooks": list(w.hook_order)}
            for w in bundle.ordinary
        ],
        "source_files": len(bundle.source_sidecars),
        "source_bytes": bundle.source_bytes,
        "members": len(bundle.members),
    }
    if inspected.record is not None:
        record = inspected.record
        data.update(deployment_id=record.deployment_id, environment=record.environment)
        if record.authority_bound:  # v2: the integrity subject binds these; an edited record never loads
            data.update(
                authority_fields="bound",
                installed_at=record.installed_at,
                authority_expires_at=record.authority_expires_at,
                authority_expired=now >= parse_timestamp(record.authority_expires_at),
            )
        else:  # a v1 record binds nothing: report no value it holds, and no live authority
            data.update(
                authority_fields="unverified: dpone.deployment-record.v1, install again to bind them",
                authority_expired=True,
            )
    return data
