"""The immutable release registry on both adapters: a local directory and S3 (moto over HTTP)."""

from __future__ import annotations

import pytest

from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore, S3Store, require_key
from dpone_dagster.release.delivery.registry import RELEASES, ReleaseRegistry, blob_key, commit_key
from dpone_dagster.release.errors import DurabilityUncertainError, RegistryError
from tests.release.fabricated import synthetic_release


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalDirectoryStore(tmp_path / "registry")
    server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")
    return S3Store(server.client(), bucket, "dpone/releases")


def admitting(target, release):
    """The publication arguments: authority, a freshly issued receipt, and the live target check."""
    return {
        "authority": release.authority,
        "receipt": target.publication(release.bundle, release.authority),
        "admission": target.issuer,
    }


def test_publish_then_fetch_returns_every_byte(store, target, release):
    registry = ReleaseRegistry(store)
    result = registry.publish(release.bundle, **admitting(target, release))
    assert not result.already_published
    assert result.objects_written == len(release.bundle.members) + 1
    assert registry.releases() == [release.bundle.release_id]
    fetched = registry.fetch(release.bundle.release_id)
    assert dict(fetched.members) == dict(release.bundle.members)


def test_identical_retry_writes_zero_bytes_and_keeps_the_identity(store, target, release):
    registry = ReleaseRegistry(store)
    first = registry.publish(release.bundle, **admitting(target, release))
    keys = sorted(store.keys())
    second = registry.publish(release.bundle, **admitting(target, release))
    assert second.release_id == first.release_id
    assert (second.bytes_written, second.objects_written, second.already_published) == (0, 0, True)
    assert sorted(store.keys()) == keys


def test_refused_admission_leaves_the_registry_empty(store, target, release):
    with pytest.raises(Exception) as raised:
        ReleaseRegistry(store).publish(
            release.bundle, authority=release.authority, receipt=None, admission=target.issuer
        )
    assert raised.value.code == "admission.receipt_missing"
    assert list(store.keys()) == []


def test_commit_object_is_written_last(store, target, release):
    order: list[str] = []
    real = store.put_if_absent

    def recording(key, data):
        order.append(key)
        return real(key, data)

    store.put_if_absent = recording
    ReleaseRegistry(store).publish(release.bundle, **admitting(target, release))
    order = [key for key in order if not key.startswith("leases/")]
    assert order[-1] == commit_key(release.bundle.release_id)
    assert all(key.startswith("blobs/") for key in order[:-1])
    assert list(store.keys("leases/")) == []


class FailingStore:
    """Delegates to a real store but raises on the n-th write (or the n-th read when `reads`).

    Lease objects (`leases/`) are passed through uncounted: these tests inject faults into the
    publication's own writes and rereads; lease failures are tested in test_operations.py."""

    def __init__(self, inner, fail_at: int, *, reads: bool = False) -> None:
        self.inner, self.fail_at, self.reads, self.count = inner, fail_at, reads, 0

    def _tick(self):
        self.count += 1
        if self.count == self.fail_at:
            raise OSError("injected storage failure")

    def put_if_absent(self, key, data):
        if not self.reads and not key.startswith("leases/"):
            self._tick()
        return self.inner.put_if_absent(key, data)

    def get(self, key):
        if self.reads and not key.startswith("leases/"):
            self._tick()
        return self.inner.get(key)

    def exists(self, key):
        return self.inner.exists(key)

    def keys(self, prefix=""):
        return self.inner.keys(prefix)

    def delete(self, key):
        return self.inner.delete(key)


def test_a_failure_at_every_write_point_is_uncertain_and_a_retry_converges(tmp_path, target, release):
    writes = len(release.bundle.members) + 1
    for fail_at in range(1, writes + 1):
        store = LocalDirectoryStore(tmp_path / f"registry-{fail_at}")
        with pytest.raises(DurabilityUncertainError) as raised:
            ReleaseRegistry(FailingStore(store, fail_at)).publish(release.bundle, **admitting(target, release))
        assert raised.value.code == "release.durability_uncertain"
        assert raised.value.release_id == release.bundle.release_id
        assert len(raised.value.written) == fail_at - 1
        assert list(store.keys(RELEASES)) == []
        retried = ReleaseRegistry(store).publish(release.bundle, **admitting(target, release))
        assert retried.release_id == release.bundle.release_id
        assert ReleaseRegistry(store).fetch(release.bundle.release_id).release_id == release.bundle.release_id


def test_a_failed_reread_is_uncertain_never_success(tmp_path, target, release):
    reads_before_commit = 1 + len(set(release.bundle.member_digests()))
    for fail_at in (2, reads_before_commit):
        store = LocalDirectoryStore(tmp_path / f"r{fail_at}")
        with pytest.raises(DurabilityUncertainError):
            ReleaseRegistry(FailingStore(store, fail_at, reads=True)).publish(
                release.bundle, **admitting(target, release)
            )
        assert list(store.keys(RELEASES)) == []


def test_s3_failure_part_way_is_uncertain_and_retry_converges(s3_server, s3_bucket, target, release):
    store = S3Store(s3_server.client(), s3_bucket, "p")
    with pytest.raises(DurabilityUncertainError):
        ReleaseRegistry(FailingStore(store, 3)).publish(release.bundle, **admitting(target, release))
    assert s3_server.keys(s3_bucket, "p/releases/") == []
    result = ReleaseRegistry(store).publish(release.bundle, **admitting(target, release))
    assert result.release_id == release.bundle.release_id
    assert s3_server.keys(s3_bucket, "p/releases/") == ["p/" + commit_key(release.bundle.release_id)]


def test_conditional_create_never_replaces(store):
    assert store.put_if_absent("a/b", b"one") is True
    assert store.put_if_absent("a/b", b"two") is False
    assert store.get("a/b") == b"one"


def test_s3_without_conditional_writes_falls_back_to_head_then_put(s3_server, s3_bucket):
    store = S3Store(s3_server.client(), s3_bucket, conditional_writes=False)
    assert store.put_if_absent("k", b"one") is True
    assert store.put_if_absent("k", b"two") is False
    assert store.get("k") == b"one"


def test_tampered_blob_is_refused_on_fetch(store, target, release):
    registry = ReleaseRegistry(store)
    registry.publish(release.bundle, **admitting(target, release))
    victim = release.bundle.member_digests()[0]
    store.delete(blob_key(victim.content_sha256))
    store.put_if_absent(blob_key(victim.content_sha256), b"tampered")
    with pytest.raises(Exception) as raised:
        registry.fetch(release.bundle.release_id)
    assert raised.value.code == "release.integrity_mismatch"


def test_a_foreign_commit_under_the_release_address_is_a_conflict(store, target, release):
    store.put_if_absent(commit_key(release.bundle.release_id), b'{"schema":"something-else"}')
    with pytest.raises(RegistryError) as raised:
        ReleaseRegistry(store).publish(release.bundle, **admitting(target, release))
    assert raised.value.code == "release.registry_conflict"


def test_missing_release_is_not_found(store):
    with pytest.raises(RegistryError) as raised:
        ReleaseRegistry(store).fetch("sha256:" + "a" * 64)
    assert raised.value.code == "release.not_found"


def test_an_identical_retry_restores_a_vanished_blob(tmp_path, target, release):
    store = LocalDirectoryStore(tmp_path / "registry")
    registry = ReleaseRegistry(store)
    registry.publish(release.bundle, **admitting(target, release))
    victim = release.bundle.member_digests()[0]
    store.delete(blob_key(victim.content_sha256))
    retried = registry.publish(release.bundle, **admitting(target, release))
    assert retried.already_published and retried.objects_written == 1 and retried.bytes_written == victim.size
    assert registry.fetch(release.bundle.release_id).release_id == release.bundle.release_id


def test_cleanup_removes_only_blobs_no_commit_references(tmp_path, target, release):
    store = LocalDirectoryStore(tmp_path / "registry")
    with pytest.raises(DurabilityUncertainError):
        ReleaseRegistry(FailingStore(store, 4)).publish(release.bundle, **admitting(target, release))
    other = synthetic_release(target, models=None, workloads={"solo": (("raw.solo",), ())}, sequence=2)
    ReleaseRegistry(store).publish(other.bundle, **admitting(target, other))
    registry = ReleaseRegistry(store)
    orphans = registry.unreferenced_blobs()
    assert len(orphans) == 3
    assert sorted(registry.remove_unreferenced_blobs()) == sorted(orphans)
    assert registry.unreferenced_blobs() == []
    assert registry.fetch(other.bundle.release_id).release_id == other.bundle.release_id


@pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "A/upper", "a/../b", "", "a\\b"])
def test_unsafe_keys_are_refused(key):
    with pytest.raises(RegistryError) as raised:
        require_key(key)
    assert raised.value.code == "release.invalid_key"
