"""Reading an installed deployment and the activation audit log: verified, read-only, no receipt.

What a reader could get wrong: reading needs no receipt on purpose (expired or revoked authority
blocks new attempts, never the evidence), but nothing read here is authority either: a deployment
record says what *was* installed, and every change is still checked against a fresh receipt.

The record's authority fields (`authority_expires_at`, `revocation_epoch`, `installed_at`) are inside
its integrity subject (`dpone.deployment-record.v2`): an edited record does not load, so nothing
reports or decides on edited values. A `dpone.deployment-record.v1` record (written before the
subject existed) still loads as evidence, with `record.authority_bound` False: its authority fields
cannot be trusted, and activation refuses it (move it aside and install the release again). A
release whose member list does not fit one document is installed with a `dpone.deployment-record.v3`
record and its member pages under `member-pages/` (`release.delivery.member_pages`): the pages are
read and verified like the registry's, and a page the record does not list is refused as a stray.
`require_staged_exactly` is install's reread of its stage: byte for byte against the bundle it just
verified, one file at a time (not a second full `open_bundle`, which would hold the release twice).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.contracts.base import ContractModel, parse_document
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.release_records import (
    AuditEntry,
    DeploymentRecord,
    DeploymentRecordV1,
    PagedDeploymentRecord,
)
from dpone_dagster.release.build.bundle import ReleaseBundle, deployment_id_of, open_bundle
from dpone_dagster.release.delivery.member_pages import MEMBER_PAGES, Listed, member_page_path, members_of
from dpone_dagster.release.errors import ActivationError, IntegrityError

GENESIS = "0" * 64


@dataclass(frozen=True)
class InstalledRelease:
    bundle: ReleaseBundle
    record: DeploymentRecord | PagedDeploymentRecord | DeploymentRecordV1
    path: Path


def read_deployment(path: Path, release_id: str) -> InstalledRelease:
    """Read and fully verify one installed deployment directory (no receipt needed: read-only)."""
    record = _read_record(path / "deployment.json")
    if record is None:
        raise IntegrityError("release.integrity_mismatch", "the deployment record is missing, unreadable or was edited")
    if record.release_id != release_id:
        raise IntegrityError("release.integrity_mismatch", "the deployment record names another release")
    listed = members_of(record, lambda relative: _file_bytes(path / relative))
    pages = {member_page_path(page) for page in getattr(record, "member_pages", ())}
    pages_root = path / MEMBER_PAGES
    if any(item.relative_to(path).as_posix() not in pages for item in pages_root.rglob("*")):
        raise IntegrityError(
            "release.integrity_mismatch", "the installed deployment holds member pages its record does not list"
        )
    members_root = path / "members"
    members = {}
    for member in listed:
        try:
            members[member.path] = (members_root / member.path).read_bytes()
        except OSError:
            raise IntegrityError("release.integrity_mismatch", f"installed member {member.path!r} is missing") from None
    stray = [
        p for p in members_root.rglob("*") if p.is_file() and p.relative_to(members_root).as_posix() not in members
    ]
    if stray:
        raise IntegrityError(
            "release.integrity_mismatch", "the installed deployment holds files its record does not list"
        )
    bundle = open_bundle(members, expected_release_id=release_id)
    if listed != bundle.member_digests() or record.grant_digest != bundle.parent.grant_digest:
        raise IntegrityError("release.integrity_mismatch", "the deployment record disagrees with the installed bytes")
    if record.deployment_id != deployment_id_of(release_id, record.environment):
        raise IntegrityError("release.integrity_mismatch", "the deployment record names another deployment")
    return InstalledRelease(bundle=bundle, record=record, path=path)


def read_audit_log(path: Path) -> list[AuditEntry]:
    """Every audit entry, with the hash chain verified; raise `release.audit_log_corrupt` if broken."""
    if not path.exists():
        return []
    entries: list[AuditEntry] = []
    previous = GENESIS
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise ActivationError("release.audit_log_corrupt", "the audit log ends in a torn line")
    for index, line in enumerate(data.splitlines(), start=1):
        try:
            entry = parse_document(AuditEntry, line)
        except (CanonicalError, CodedError):
            raise ActivationError("release.audit_log_corrupt", f"audit line {index} is not a valid entry") from None
        if entry.sequence != index or entry.previous_entry_sha256 != previous:
            raise ActivationError("release.audit_log_corrupt", f"the audit chain breaks at line {index}")
        entries.append(entry)
        previous = hashlib.sha256(line).hexdigest()
    return entries


def _read_record(path: Path) -> DeploymentRecord | PagedDeploymentRecord | DeploymentRecordV1 | None:
    data = _file_bytes(path)
    for model in (DeploymentRecord, PagedDeploymentRecord, DeploymentRecordV1):
        try:
            return parse_document(model, data) if data is not None else None
        except (CanonicalError, CodedError):
            continue
    return None


def _file_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def read_document(model: type[ContractModel], path: Path):
    try:
        return parse_document(model, path.read_bytes())
    except (OSError, CanonicalError, CodedError):
        return None


def require_staged_exactly(staging: Path, bundle: ReleaseBundle, record: Listed) -> None:
    """Reread the staged deployment: exactly the verified bundle's members, the record and its pages, byte for byte.

    `bundle` was fully verified (`open_bundle`) and `record` built from it, so equal bytes on disk are
    a deployment `read_deployment` accepts; comparing them file by file keeps one file in memory at a
    time instead of a second verified copy of the whole release (10,000 workloads: ~50,000 members).
    """
    expected = {"deployment.json": record.data, **record.pages}
    expected.update((f"members/{path}", data) for path, data in bundle.members.items())
    found = 0
    for item in staging.rglob("*"):
        if item.is_dir():
            continue
        relative = item.relative_to(staging).as_posix()
        if relative not in expected or item.read_bytes() != expected[relative]:
            raise IntegrityError(
                "release.integrity_mismatch", "the staged deployment differs from the verified release"
            )
        found += 1
    if found != len(expected):
        raise IntegrityError("release.integrity_mismatch", "the staged deployment lacks a file of the verified release")
