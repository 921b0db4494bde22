"""The immutable release registry: content-addressed publication over an `ObjectStore`.

Layout (the same on a local directory and on S3):
- `blobs/sha256/<hex>`: every member's bytes, addressed by their plain SHA-256;
- `releases/<hex>.json`: one commit object per release (`<hex>` is the release identity's hex),
  listing every member path with its hash and size. It is written *last*, with a conditional
  create, so a release is visible only once every byte it names is stored and reread;
- `member-pages/<hex>.json`: the member pages of a commit too large for one document
  (`dpone.release-commit.v2`, `release.delivery.member_pages`), written after the blobs and before
  the commit, content-addressed (two releases share an identical page).

`publish` runs, in order: full bundle verification (sealed projection and artifact integrity), the
commit's bytes and pages (a member list no commit or deployment record can list refuses here,
`release.membership_undeliverable`), the combined workload and byte budget, the publication receipt
re-verified against the live target (`TargetAdmission.require_current`), then blob and page writes,
a reread of each, the commit object, and a reread of the commit.
Everything before the first write is a refusal that leaves the registry untouched; a failure after
the first write is `release.durability_uncertain` listing what is known. An identical retry finds
the commit and writes zero bytes; a retry after an uncertain failure converges on the same identity.

What a reader could get wrong: blobs without a commit are not a release. They are what an
interrupted publication leaves behind; `unreferenced_blobs` lists them for cleanup. Cleanup never
runs while a publication is in flight: `publish` holds a `publication` lease (`release.leases`)
from just before its first blob write until after its last reread, and `remove_unreferenced_blobs`
runs only inside a `cleanup` lease, which refuses while any live writer lease exists. A publication
also re-checks its blobs after committing and restores any that vanished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from dpone_dagster.clock import Clock, SystemClock
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt, PublicationReceipt
from dpone_dagster.contracts.release_records import MemberDigest, PagedReleaseCommit, ReleaseCommit
from dpone_dagster.release.build.budget import require_within_budget
from dpone_dagster.release.build.bundle import ReleaseBundle, content_sha256, deployment_projection, open_bundle
from dpone_dagster.release.build.compose import require_authority
from dpone_dagster.release.delivery.leases import DEFAULT_LEASE_TTL, Leases
from dpone_dagster.release.delivery.member_pages import (
    MEMBER_PAGES,
    commit_documents,
    member_page_path,
    members_of,
    require_deliverable,
)
from dpone_dagster.release.errors import DurabilityUncertainError, RegistryError
from dpone_dagster.release.ports import BatchedWrites, ObjectStore, TargetAdmission

BLOBS = "blobs/sha256/"
RELEASES = "releases/"


def commit_key(release_id: str) -> str:
    return f"{RELEASES}{release_id.removeprefix('sha256:')}.json"


def blob_key(sha256_hex: str) -> str:
    return f"{BLOBS}{sha256_hex}"


@dataclass(frozen=True)
class PublicationResult:
    release_id: str
    commit_key: str
    bytes_written: int
    objects_written: int
    already_published: bool


def commit_for(bundle: ReleaseBundle) -> ReleaseCommit | PagedReleaseCommit:
    """The commit object of `bundle` (a v1 commit when its member list fits one document, else v2)."""
    return commit_documents(bundle.release_id, bundle.member_digests()).document


@dataclass(frozen=True)
class _Planned:
    """Everything a publication writes, computed before its first write: objects (key -> bytes), then the commit."""

    release_id: str
    key: str
    commit: bytes
    objects: Mapping[str, bytes]
    """Blobs (`blobs/sha256/<hex>`) in member path order, then member pages; each key once."""


def _plan(bundle: ReleaseBundle) -> _Planned:
    members = bundle.member_digests()
    listed = commit_documents(bundle.release_id, members)
    require_deliverable(members)  # the deployment record install writes lists the same members
    data_by_hash = _by_hash(bundle)
    objects = {blob_key(member.content_sha256): data_by_hash[member.content_sha256] for member in members}
    objects.update(listed.pages)
    return _Planned(bundle.release_id, commit_key(bundle.release_id), listed.data, objects)


class ReleaseRegistry:
    """Publish and read immutable releases. Nothing here replaces or deletes a committed release."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        name: str = "registry",
        clock: Clock | None = None,
        lease_ttl: timedelta = DEFAULT_LEASE_TTL,
    ) -> None:
        self.store = store
        self.name = name
        self.leases = Leases(store, clock or SystemClock(), lease_ttl)

    def publish(
        self,
        bundle: ReleaseBundle,
        *,
        authority: DevelopmentAuthorityReceipt,
        receipt: PublicationReceipt | None,
        admission: TargetAdmission,
    ) -> PublicationResult:
        """Publish `bundle` under `receipt`, re-verified with `admission` right before the first write."""
        require_authority(authority)
        verified = open_bundle(bundle.members, expected_release_id=bundle.release_id)
        deployment_id = deployment_projection(verified, authority).deployment_id
        planned = _plan(verified)
        require_within_budget(
            workloads=verified.workload_count, source_bytes=verified.source_bytes, limits=authority.effective_limits
        )
        admission.require_current(
            receipt,
            PublicationReceipt,
            release_id=verified.release_id,
            deployment_id=deployment_id,
            authority=authority,
        )
        with self.leases.hold("publication", subject=verified.release_id):
            return self._publish(planned)

    def _publish(self, planned: _Planned) -> PublicationResult:
        existing = self._read(planned.key)
        if existing is None:
            return self._write(planned)
        self._require_same_commit(existing, planned.commit)
        restored = self._restore_vanished(planned, [])
        self._reread(planned, stage="retry", written=restored or None)
        restored_bytes = sum(len(planned.objects[key]) for key in restored)
        return PublicationResult(planned.release_id, planned.key, restored_bytes, len(restored), already_published=True)

    def _write(self, planned: _Planned) -> PublicationResult:
        written: list[str] = []
        bytes_written = 0
        keys = list(planned.objects)
        batch = self.store.batch() if isinstance(self.store, BatchedWrites) else contextlib.nullcontext()
        try:
            with batch:  # every blob and page durable before the reread, the commit after it
                for index, key in enumerate(keys):
                    data = planned.objects[key]
                    try:
                        created = self.store.put_if_absent(key, data)
                    except Exception:
                        raise self._uncertain(planned.release_id, "blobs", written, keys[index:]) from None
                    if created:
                        written.append(key)
                        bytes_written += len(data)
        except DurabilityUncertainError:
            raise
        except Exception:  # the batch could not be made durable or linked
            raise self._uncertain(planned.release_id, "blobs", written, keys) from None
        self._reread(planned, stage="blobs", written=written)
        try:
            created = self.store.put_if_absent(planned.key, planned.commit)
        except Exception:
            raise self._uncertain(planned.release_id, "commit", written, [planned.key]) from None
        if not created:
            self._require_same_commit(self._read(planned.key), planned.commit)
        else:
            written.append(planned.key)
            bytes_written += len(planned.commit)
        if self._read(planned.key, stage="commit", written=written, release_id=planned.release_id) != planned.commit:
            raise self._uncertain(planned.release_id, "commit", written, [planned.key])
        written.extend(self._restore_vanished(planned, written))
        return PublicationResult(
            planned.release_id, planned.key, bytes_written, len(written), already_published=not created
        )

    def fetch(self, release_id: str) -> ReleaseBundle:
        """Read a committed release and verify every byte of it; raise if absent or altered."""
        members = {member.path: self._blob(member) for member in self._members(release_id)}
        return open_bundle(members, expected_release_id=release_id)

    def _members(self, release_id: str) -> tuple[MemberDigest, ...]:
        """The verified member list of a committed release (its pages read when the commit is paged)."""
        data = self._read(commit_key(release_id))
        if data is None:
            raise RegistryError("release.not_found", "no committed release with that identity")
        commit = self._parse_commit(data)
        if commit.release_id != release_id:
            raise RegistryError("release.registry_conflict", "the commit object names another release")
        return members_of(commit, self._read)

    def releases(self) -> list[str]:
        """Identities of every committed release."""
        return [
            "sha256:" + key.removeprefix(RELEASES).removesuffix(".json")
            for key in self._keys(RELEASES)
            if key.endswith(".json")
        ]

    def unreferenced_blobs(self) -> list[str]:
        """Blob and member-page keys no commit names (left by interrupted publications).

        An unreadable commit refuses."""
        referenced = set()
        for release_id in self.releases():
            data = self._read(commit_key(release_id))
            if data is None:
                raise RegistryError("release.registry_unavailable", "a commit object vanished while listing references")
            commit = self._parse_commit(data)
            if isinstance(commit, PagedReleaseCommit):
                referenced.update(member_page_path(page) for page in commit.member_pages)
            referenced.update(blob_key(m.content_sha256) for m in members_of(commit, self._read))
        return [key for key in self._keys(BLOBS) + self._keys(MEMBER_PAGES) if key not in referenced]

    def remove_unreferenced_blobs(self, candidates: list[str] | None = None) -> list[str]:
        """Delete those of `candidates` (default: all) still unreferenced. Call only inside a cleanup lease."""
        still = self.unreferenced_blobs()
        unreferenced = set(still)
        removed = [key for key in (still if candidates is None else candidates) if key in unreferenced]
        for key in removed:
            try:
                self.store.delete(key)
            except Exception:
                raise RegistryError("release.registry_unavailable", f"the {self.name} refused a delete") from None
        return removed

    def _blob(self, member: MemberDigest) -> bytes:
        data = self._read(blob_key(member.content_sha256))
        if data is None:
            raise RegistryError("release.not_found", f"member {member.path!r} of a committed release is missing")
        return data

    def _reread(self, planned: _Planned, *, stage: str, written: list[str] | None = None) -> None:
        for key, expected in planned.objects.items():
            data = self._read(key, stage=stage, written=written, release_id=planned.release_id)
            if data != expected:
                if written is None:
                    raise RegistryError("release.registry_conflict", f"stored object {key!r} is missing or altered")
                raise self._uncertain(planned.release_id, stage, written, [key])

    def _restore_vanished(self, planned: _Planned, written: list[str]) -> list[str]:
        """Re-put any blob or page of a committed release that is gone (content-addressed: same bytes)."""
        restored: list[str] = []
        for key, data in planned.objects.items():
            try:
                if self.store.exists(key):
                    continue
                self.store.put_if_absent(key, data)
            except Exception:
                raise self._uncertain(planned.release_id, "restore", written + restored, [key]) from None
            restored.append(key)
        return restored

    def _read(
        self, key: str, *, stage: str | None = None, written: list[str] | None = None, release_id: str = ""
    ) -> bytes | None:
        try:
            return self.store.get(key)
        except Exception:
            if stage is not None and written is not None:
                raise self._uncertain(release_id, stage, written, [key]) from None
            raise RegistryError("release.registry_unavailable", f"the {self.name} could not be read") from None

    def _keys(self, prefix: str) -> list[str]:
        try:
            return list(self.store.keys(prefix))
        except Exception:
            raise RegistryError("release.registry_unavailable", f"the {self.name} could not be listed") from None

    def _parse_commit(self, data: bytes) -> ReleaseCommit | PagedReleaseCommit:
        for model in (ReleaseCommit, PagedReleaseCommit):
            try:
                return parse_document(model, data)
            except (CanonicalError, CodedError):
                continue
        raise RegistryError("release.registry_conflict", "a commit object is not a valid release commit")

    def _require_same_commit(self, existing: bytes | None, commit: bytes) -> None:
        if existing != commit:
            raise RegistryError(
                "release.registry_conflict",
                "the registry holds different bytes under this release's content address",
            )

    def _uncertain(
        self, release_id: str, stage: str, written: list[str], pending: list[str]
    ) -> DurabilityUncertainError:
        return DurabilityUncertainError(
            f"publication to the {self.name} failed during {stage}: {len(written)} object(s) written, "
            f"{len(pending)} not confirmed; the release is not committed unless a retry says so",
            release_id=release_id,
            stage=stage,
            written=written,
            pending=pending,
        )


def _by_hash(bundle: ReleaseBundle) -> dict[str, bytes]:
    return {content_sha256(data): data for data in bundle.members.values()}
