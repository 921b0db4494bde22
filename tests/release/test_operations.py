"""Operator operations over the service layer: recover, repair-audit, rollback, gc, and registry leases.

Each operation issues its own receipt from the grant the authority location holds (here: the
fabricated target's grant) and runs through the same `ReleaseCache` / `ReleaseRegistry` the release
job uses. The fault tests kill an activation between its durable intent and its pointer write.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from dpone_dagster.authority.synthetic import SYNTHETIC_REPOSITORY
from dpone_dagster.authority.target_admission import AdmissionError
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.grant import ExecutionSubject
from dpone_dagster.contracts.receipts import CleanupReceipt
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.leases import LeaseError
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.operations import OperationError, ReleaseOperations
from dpone_dagster.release.delivery.registry import ReleaseRegistry, blob_key
from dpone_dagster.release.errors import ActivationError
from dpone_dagster.release.source.local_files import LocalFiles
from tests.release.fabricated import synthetic_release


class FailingPointer(LocalFiles):
    """The process dies between the durable intent and the pointer write."""

    def replace(self, path, data):
        raise OSError("killed between intent and pointer write")


class FailingIntentClear(LocalFiles):
    """Pointer and audit entry are durable; removing the intent fails."""

    def remove(self, path):
        raise OSError("killed before the intent was cleared")


class CountingFiles(LocalFiles):
    def __init__(self):
        self.replaced = 0

    def replace(self, path, data):
        self.replaced += 1
        super().replace(path, data)


class TargetGrant:
    """`GrantSource` over the fabricated target: the grant `synthetic_release` verified (same inputs)."""

    def __init__(self, target, release):
        subjects = [ExecutionSubject(**s) for s in release.ordinary.execution_subjects()] if release.ordinary else []
        self.bytes, self.signatures = target.signed_grant(
            native=list(release.bundle.native_membership),
            ordinary=list(release.bundle.ordinary_membership),
            execution_subjects=subjects,
        )

    def grant(self):
        return self.bytes, self.signatures


def operations(target, release, root, *, files=None, registry=None):
    cache = ReleaseCache(root / "cache", admission=target.issuer, clock=target.clock, files=files)
    registry = registry or ReleaseRegistry(LocalDirectoryStore(root / "registry"), clock=target.clock)

    def verify(grant_bytes, signatures, source):
        return verify_grant(
            grant_bytes,
            signatures,
            pinned_policy_digest=target.authority.policy_digest,
            source=source,
            ports=target.authority.ports,
        )

    return ReleaseOperations(
        cache=cache,
        registry=registry,
        issuer=target.issuer,
        grant=TargetGrant(target, release),
        verify=verify,
        repository=SYNTHETIC_REPOSITORY,
    )


def install(cache, target, release):
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    return cache.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))


def killed_midway(target, release, root):
    """Materialize, then an activation killed after its intent and before its pointer write."""
    broken = ReleaseCache(root / "cache", admission=target.issuer, clock=target.clock, files=FailingPointer())
    broken.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    with pytest.raises(ActivationError) as raised:
        broken.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "release.activation_recovery_required"


# -- recover ----------------------------------------------------------------------------------


def test_recover_after_a_mid_activation_kill_restores_a_consistent_audited_state(tmp_path, target, release):
    killed_midway(target, release, tmp_path)
    ops = operations(target, release, tmp_path)
    assert ops.cache.pending() is not None and ops.cache.current() is None
    with pytest.raises(ActivationError) as refused:  # what every later release_job install meets
        ops.cache.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert refused.value.code == "release.activation_recovery_required"

    planned = ops.recover(dry_run=True)
    assert (planned.action, planned.release_id) == ("would_recover", release.bundle.release_id)
    assert ops.cache.pending() is not None and ops.cache.current() is None  # a dry run writes nothing

    outcome = ops.recover()
    assert (outcome.action, outcome.receipt_kind) == ("recovered", "pointer_recovery")
    assert ops.cache.pending() is None and ops.cache.current().release_id == release.bundle.release_id
    [entry] = ops.cache.audit_log()
    assert (entry.authorized_by, entry.release_id, entry.receipt_digest) == (
        "pointer_recovery",
        release.bundle.release_id,
        outcome.receipt_digest,
    )
    assert ops.cache.load(release.bundle.release_id).record.deployment_id == outcome.deployment_id
    assert ops.recover().action == "nothing_pending"


def test_a_pending_intent_is_the_first_thing_any_activation_or_rollback_meets(tmp_path, target, release):
    """Guard: `activate` refuses a pending intent before anything else (receipt, installed bytes)."""
    killed_midway(target, release, tmp_path)
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    for attempt in (
        lambda: cache.activate(release.bundle.release_id, receipt=None),
        lambda: cache.activate("sha256:" + "0" * 64, receipt=None),
    ):
        with pytest.raises(ActivationError) as raised:
            attempt()
        assert raised.value.code == "release.activation_recovery_required"
    assert cache.current() is None and cache.audit_log() == []


def test_recover_refuses_a_release_built_under_another_grant(tmp_path, target, release):
    killed_midway(target, release, tmp_path)
    other = synthetic_release(target, models=None, workloads={"solo": (("raw.solo",), ())}, sequence=2)
    ops = operations(target, other, tmp_path)
    with pytest.raises(OperationError) as raised:
        ops.recover()
    assert raised.value.code == "release.operation_grant_superseded"
    assert ops.cache.pending() is not None and ops.cache.current() is None


def test_recovery_after_a_failed_intent_clear_appends_no_second_audit_entry(tmp_path, target, release):
    """Guard: `_complete` appends the audit entry only when the log lacks it."""
    broken = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock, files=FailingIntentClear())
    with pytest.raises(ActivationError):
        install(broken, target, release)
    assert broken.current() is not None and len(broken.audit_log()) == 1 and broken.pending() is not None
    counting = CountingFiles()
    ops = operations(target, release, tmp_path, files=counting)
    assert ops.recover().action == "recovered_audit_only"
    assert [e.sequence for e in ops.cache.audit_log()] == [1]
    assert counting.replaced == 0  # guard: the pointer already names the intent's release, so it is not rewritten
    assert ops.cache.pending() is None


# -- repair-audit -----------------------------------------------------------------------------


def test_repair_audit_restores_a_lost_entry_under_its_own_receipt(tmp_path, target, release):
    ops = operations(target, release, tmp_path)
    assert ops.repair_audit().action == "nothing_active"
    install(ops.cache, target, release)
    assert ops.repair_audit().action == "audit_complete"
    (ops.cache.root / "audit.log").write_bytes(b"")
    assert ops.repair_audit(dry_run=True).action == "would_repair" and ops.cache.audit_log() == []
    outcome = ops.repair_audit()
    assert (outcome.action, outcome.receipt_kind) == ("repaired", "audit_repair")
    assert [(e.authorized_by, e.receipt_digest) for e in ops.cache.audit_log()] == [
        ("audit_repair", outcome.receipt_digest)
    ]


def test_repair_audit_refuses_while_an_activation_is_pending(tmp_path, target, release):
    """Guard: `ReleaseCache.repair_audit` refuses a pending intent (it would audit the wrong pointer)."""
    ops = operations(target, release, tmp_path)
    install(ops.cache, target, release)
    newer = synthetic_release(target, edit={"shop/models/orders.sql": b"select 2 as id\n"})
    broken = ReleaseCache(ops.cache.root, admission=target.issuer, clock=target.clock, files=FailingPointer())
    broken.materialize(
        newer.bundle, authority=newer.authority, receipt=target.materialization(newer.bundle, newer.authority)
    )
    with pytest.raises(ActivationError):
        broken.activate(newer.bundle.release_id, receipt=target.activation(newer.bundle, newer.authority))
    with pytest.raises(ActivationError) as raised:
        ops.cache.repair_audit(receipt=target.activation(release.bundle, release.authority, purpose="audit_repair"))
    assert raised.value.code == "release.activation_recovery_required"
    with pytest.raises(ActivationError):
        ops.repair_audit()
    assert len(ops.cache.audit_log()) == 1


def test_repair_audit_refuses_when_entries_before_the_active_one_are_lost(tmp_path, target, release):
    """Guard: the audit entry must be exactly the next one (`_append_audit`); nothing is appended."""
    newer = synthetic_release(target, edit={"shop/models/orders.sql": b"select 2 as id\n"})
    ops = operations(target, release, tmp_path)
    install(ops.cache, target, release)
    install(ops.cache, target, newer)
    (ops.cache.root / "audit.log").write_bytes(b"")
    with pytest.raises(ActivationError) as raised:
        ops.cache.repair_audit(receipt=target.activation(newer.bundle, newer.authority, purpose="audit_repair"))
    assert raised.value.code == "release.audit_log_corrupt"
    assert (ops.cache.root / "audit.log").read_bytes() == b""


def test_repair_audit_of_an_empty_cache_is_nothing(tmp_path, target, release):
    """Guard: `repair_audit` with no active deployment returns None (never dereferences a missing pointer)."""
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    assert cache.repair_audit(receipt=None) is None


# -- rollback ---------------------------------------------------------------------------------


def test_rollback_selects_the_previous_deployment_under_a_rollback_receipt(tmp_path, target, release):
    newer = synthetic_release(target, edit={"shop/models/orders.sql": b"select 2 as id\n"})
    assert newer.authority.grant_digest == release.authority.grant_digest  # same grant, different bytes
    ops = operations(target, release, tmp_path)
    with pytest.raises(ActivationError) as none:
        ops.rollback()
    assert none.value.code == "release.no_previous_deployment"
    install(ops.cache, target, release)
    install(ops.cache, target, newer)
    planned = ops.rollback(dry_run=True)
    assert (planned.action, planned.release_id, planned.previous_release_id) == (
        "would_roll_back",
        release.bundle.release_id,
        newer.bundle.release_id,
    )
    assert ops.cache.current().release_id == newer.bundle.release_id
    outcome = ops.rollback()
    assert (outcome.action, outcome.release_id, outcome.receipt_kind) == (
        "rolled_back",
        release.bundle.release_id,
        "rollback",
    )
    assert ops.cache.current().release_id == release.bundle.release_id
    assert [(e.action, e.authorized_by) for e in ops.cache.audit_log()][-1] == ("rollback", "rollback")
    with pytest.raises(AdmissionError):  # an `activate` receipt never admits a rollback
        ops.cache.rollback(receipt=target.activation(newer.bundle, newer.authority))


# -- gc and leases ----------------------------------------------------------------------------


def interrupted_publication(target, release, registry):
    """Blobs of a publication that died before its commit object: unreferenced."""
    for path, data in list(release.bundle.members.items())[:2]:
        from dpone_dagster.release.build.bundle import content_sha256

        registry.store.put_if_absent(blob_key(content_sha256(data)), data)


def test_gc_dry_run_lists_and_gc_removes_only_unreferenced_objects(tmp_path, target, release):
    orphan = synthetic_release(target, models=None, workloads={"solo": (("raw.solo",), ())}, sequence=2)
    ops = operations(target, release, tmp_path)
    ops.registry.publish(
        release.bundle,
        authority=release.authority,
        receipt=target.publication(release.bundle, release.authority),
        admission=target.issuer,
    )
    install(ops.cache, target, release)
    interrupted_publication(target, orphan, ops.registry)
    (ops.cache.root / "staging" / "abandoned-0001" / "members").mkdir(parents=True)
    referenced = sorted(set(ops.registry.store.keys("blobs/")) - set(ops.registry.unreferenced_blobs()))
    orphans = ops.registry.unreferenced_blobs()
    assert orphans and referenced

    listed = ops.gc(dry_run=True)
    assert listed.action == "would_remove"
    assert (sorted(listed.removed["blobs"]), listed.removed["staging"]) == (sorted(orphans), ["abandoned-0001"])
    assert sorted(ops.registry.store.keys("blobs/")) == sorted(referenced + orphans)  # nothing removed

    removed = ops.gc()
    assert (removed.action, removed.receipt_kind) == ("removed", "cleanup")
    assert sorted(removed.removed["blobs"]) == sorted(orphans) and removed.removed["staging"] == ["abandoned-0001"]
    assert sorted(ops.registry.store.keys("blobs/")) == referenced
    assert ops.registry.fetch(release.bundle.release_id).release_id == release.bundle.release_id
    assert ops.cache.load(ops.cache.current().release_id).bundle.release_id == release.bundle.release_id
    assert list(ops.registry.store.keys("leases/")) == []
    assert ops.gc().action == "nothing_to_remove"


def test_gc_keeps_blobs_a_commit_references(tmp_path, target, release):
    """Guard: only blobs no commit names are candidates."""
    ops = operations(target, release, tmp_path)
    ops.registry.publish(
        release.bundle,
        authority=release.authority,
        receipt=target.publication(release.bundle, release.authority),
        admission=target.issuer,
    )
    before = sorted(ops.registry.store.keys("blobs/"))
    assert ops.gc().removed.get("blobs", []) == []
    assert sorted(ops.registry.store.keys("blobs/")) == before
    assert ops.registry.remove_unreferenced_blobs(before) == []  # the re-check refuses stale candidates too
    assert sorted(ops.registry.store.keys("blobs/")) == before


def test_gc_is_refused_while_a_publication_holds_its_lease(tmp_path, target, release):
    ops = operations(target, release, tmp_path)
    interrupted_publication(target, release, ops.registry)
    orphans = ops.registry.unreferenced_blobs()
    with ops.registry.leases.hold("publication"):
        for dry_run in (True, False):
            with pytest.raises(LeaseError) as raised:
                ops.gc(dry_run=dry_run)
            assert raised.value.code == "release.publication_in_progress"
        assert sorted(ops.registry.unreferenced_blobs()) == sorted(orphans)
    assert sorted(ops.gc().removed["blobs"]) == sorted(orphans)


def test_a_publication_is_refused_while_gc_holds_its_lease(tmp_path, target, release):
    ops = operations(target, release, tmp_path)
    with ops.registry.leases.hold("cleanup"):
        with pytest.raises(LeaseError) as raised:
            ops.registry.publish(
                release.bundle,
                authority=release.authority,
                receipt=target.publication(release.bundle, release.authority),
                admission=target.issuer,
            )
        assert raised.value.code == "release.cleanup_in_progress"
        assert list(ops.registry.store.keys("blobs/")) == []
    assert list(ops.registry.store.keys("leases/")) == []


def test_an_expired_publication_lease_no_longer_blocks_gc_and_is_removed(tmp_path, target, release):
    registry = ReleaseRegistry(
        LocalDirectoryStore(tmp_path / "registry"), clock=target.clock, lease_ttl=timedelta(minutes=5)
    )
    ops = operations(target, release, tmp_path, registry=registry)
    crashed = registry.leases.hold("publication")
    crashed.__enter__()  # a publication that died: its lease is never deleted
    with pytest.raises(LeaseError):
        ops.gc()
    later = ReleaseRegistry(registry.store, clock=_Later(target.clock, timedelta(minutes=6)))
    ops.registry = later
    outcome = ops.gc()
    assert len(outcome.removed["expired_leases"]) == 1 and list(registry.store.keys("leases/")) == []


def test_an_unreadable_lease_is_treated_as_held(tmp_path, target, release):
    ops = operations(target, release, tmp_path)
    ops.registry.store.put_if_absent("leases/publication-torn.json", b"{not json")
    with pytest.raises(LeaseError) as raised:
        ops.gc()
    assert raised.value.code == "release.lease_unreadable"


def test_gc_runs_only_under_a_live_cleanup_receipt(tmp_path, target, release):
    receipt = target.issuer.issue_cleanup()
    assert isinstance(receipt, CleanupReceipt) and target.issuer.require_cleanup(receipt) is receipt
    with pytest.raises(AdmissionError) as wrong:
        target.issuer.require_cleanup(target.publication(release.bundle, release.authority))
    assert wrong.value.code == "admission.receipt_kind_mismatch"
    target.live.revocation_epoch += 1
    with pytest.raises(Exception) as revoked:
        target.issuer.require_cleanup(receipt)
    assert revoked.value.code == "authority.activation_authority"


class RevokedOnceCleanupIsPrepared:
    """The live target's epoch changes as soon as a cleanup lease exists (revocation mid-gc)."""

    def __init__(self, live, store):
        self.live, self.store = live, store

    def current(self, target):
        answer = self.live.current(target)
        if any(key.startswith("leases/cleanup-") for key in self.store.keys("leases/")):
            return answer.model_copy(update={"revocation_epoch": answer.revocation_epoch + 1})
        return answer


def test_gc_rechecks_its_receipt_after_taking_the_lease_and_removes_nothing_when_revoked(tmp_path, target, release):
    from dpone_dagster.authority.target_admission import ReceiptIssuer, RecoveryRequiredError

    ops = operations(target, release, tmp_path)
    interrupted_publication(target, release, ops.registry)
    orphans = sorted(ops.registry.unreferenced_blobs())
    ops.issuer = ReceiptIssuer(
        target.configuration, RevokedOnceCleanupIsPrepared(target.live, ops.registry.store), target.clock
    )
    with pytest.raises(RecoveryRequiredError) as raised:
        ops.gc()
    assert raised.value.code == "authority.recovery_required"
    assert sorted(ops.registry.unreferenced_blobs()) == orphans and list(ops.registry.store.keys("leases/")) == []


class _Later:
    def __init__(self, clock, delta):
        self.clock, self.delta = clock, delta

    def now(self):
        return self.clock.now() + self.delta
