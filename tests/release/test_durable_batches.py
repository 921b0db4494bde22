"""Many small objects made durable together: the registry's blob batch and the cache's staged install.

A release of 10,000 workloads has ~50,000 members. One fsync per file (and one per directory entry)
made the disk's commit latency, not the work, set its publish and install time. Both now write their
files unsynced and make them durable with one filesystem sync *before* anything names them: the
registry links a blob into place only after the sync, the cache renames its stage into place only
after it. These tests pin that order (a named object whose bytes were never synced would survive a
crash as garbage under a content address) and what a failure inside a batch leaves.
"""

from __future__ import annotations

import os

import pytest

from dpone_dagster.release.delivery import object_stores
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry, blob_key
from dpone_dagster.release.source import local_files
from dpone_dagster.release.source.local_files import LocalFiles
from tests.release.test_registry import admitting


def test_a_batch_names_its_objects_only_after_their_bytes_are_synced(tmp_path, monkeypatch):
    store = LocalDirectoryStore(tmp_path / "registry")
    seen_at_sync: list[list[str]] = []
    real_sync = object_stores.sync_filesystem

    def spying_sync(path):
        seen_at_sync.append(list(store.keys("blobs/")))
        return real_sync(path)

    monkeypatch.setattr(object_stores, "sync_filesystem", spying_sync)
    with store.batch():
        assert store.put_if_absent("blobs/a", b"one") is True
        assert store.put_if_absent("blobs/a", b"one") is False  # staged once
        assert store.put_if_absent("blobs/b", b"two") is True
        assert store.get("blobs/a") is None  # not named before the batch is durable
    assert seen_at_sync == [[]]
    assert (store.get("blobs/a"), store.get("blobs/b")) == (b"one", b"two")
    assert list((tmp_path / "registry" / ".staging").iterdir()) == []


def test_a_batch_that_fails_names_nothing_and_leaves_no_temporaries(tmp_path):
    store = LocalDirectoryStore(tmp_path / "registry")
    with pytest.raises(RuntimeError), store.batch():
        store.put_if_absent("blobs/a", b"one")
        raise RuntimeError("interrupted")
    assert list(store.keys()) == []
    assert list((tmp_path / "registry" / ".staging").iterdir()) == []
    with store.batch():  # the store is usable again
        store.put_if_absent("blobs/a", b"one")
    assert store.get("blobs/a") == b"one"


def test_another_threads_write_during_a_batch_is_durable_and_visible_at_once(tmp_path):
    """Only the thread that opened the batch stages; a lease written by another thread is not held back."""
    import threading

    store = LocalDirectoryStore(tmp_path / "registry")
    seen: dict[str, object] = {}

    def other_thread():
        seen["created"] = store.put_if_absent("leases/other.json", b"{}")
        seen["visible"] = store.get("leases/other.json")

    with store.batch():
        store.put_if_absent("blobs/a", b"one")
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert seen == {"created": True, "visible": b"{}"}
        assert store.get("blobs/a") is None
    assert store.get("blobs/a") == b"one"


def test_without_syncfs_every_batched_file_is_fsynced_before_it_is_named(tmp_path, monkeypatch):
    store = LocalDirectoryStore(tmp_path / "registry")
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if "/.staging/" in path:
            synced.append(path)
            assert list(store.keys("blobs/")) == []  # nothing named yet
        real_fsync(fd)

    monkeypatch.setattr(local_files, "_SYNCFS", None)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    with store.batch():
        store.put_if_absent("blobs/a", b"one")
        store.put_if_absent("blobs/b", b"two")
    assert len(synced) == 2
    assert sorted(store.keys("blobs/")) == ["blobs/a", "blobs/b"]


def test_publish_of_a_release_costs_no_fsync_per_blob(tmp_path, monkeypatch, target, release):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    store = LocalDirectoryStore(tmp_path / "registry")
    ReleaseRegistry(store).publish(release.bundle, **admitting(target, release))
    blobs = len(set(release.bundle.member_digests()))
    assert blobs >= 10
    assert store.get(blob_key(release.bundle.member_digests()[0].content_sha256)) is not None
    # the lease (put and fsynced twice), the commit (file + directory), the blob directory once
    assert len(calls) <= 6, (len(calls), blobs)


class _OrderedFiles(LocalFiles):
    def __init__(self):
        self.events: list[tuple[str, int]] = []

    def sync_tree(self, root):
        self.events.append(("sync", sum(1 for p in root.rglob("*") if p.is_file())))
        super().sync_tree(root)

    def rename_new(self, source, target):
        self.events.append(("rename", 0))
        super().rename_new(source, target)


def test_install_makes_the_whole_stage_durable_before_the_rename(tmp_path, target, release):
    files = _OrderedFiles()
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock, files=files)
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    staged_files = len(release.bundle.members) + 1  # the members and deployment.json
    assert files.events == [("sync", staged_files), ("rename", 0)]


def test_sync_tree_without_syncfs_fsyncs_every_file_and_folder(tmp_path, monkeypatch):
    (tmp_path / "stage" / "members" / "a").mkdir(parents=True)
    (tmp_path / "stage" / "members" / "a" / "x.sql").write_bytes(b"x")
    (tmp_path / "stage" / "deployment.json").write_bytes(b"{}")
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(local_files, "_SYNCFS", None)
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    LocalFiles().sync_tree(tmp_path / "stage")
    stage = str(tmp_path / "stage")
    assert sorted(synced) == sorted(
        [stage, f"{stage}/deployment.json", f"{stage}/members", f"{stage}/members/a", f"{stage}/members/a/x.sql"]
    )
