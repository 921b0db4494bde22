"""The local release cache: materialization, activation, audit log, rollback, recovery, repair."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dpone_dagster.authority.target_admission import ActivationAuthorityError, AdmissionError, RecoveryRequiredError
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.errors import ActivationError, BudgetExceededError, DurabilityUncertainError, IntegrityError
from dpone_dagster.release.source.local_files import LocalFiles
from tests.release.fabricated import synthetic_release


@pytest.fixture
def cache(tmp_path, target):
    return ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)


def install(cache, target, release):
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    return cache.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))


def tree(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def test_materialize_and_activate(cache, target, release):
    result = install(cache, target, release)
    assert result.changed and result.previous_release_id is None and result.audit_sequence == 1
    assert cache.current().release_id == release.bundle.release_id
    assert cache.load(release.bundle.release_id).bundle.members == release.bundle.members
    [entry] = cache.audit_log()
    assert (entry.action, entry.authorized_by, entry.release_id) == ("activate", "activate", release.bundle.release_id)
    assert cache.pending() is None


def test_identical_materialization_writes_nothing(cache, target, release):
    first = cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    before = tree(cache.root)
    again = cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    assert first.bytes_written > 0 and (again.bytes_written, again.already_installed) == (0, True)
    assert tree(cache.root) == before


def test_receipts_are_not_interchangeable(cache, target, release):
    publication = target.publication(release.bundle, release.authority)
    with pytest.raises(AdmissionError) as raised:
        cache.materialize(release.bundle, authority=release.authority, receipt=publication)
    assert raised.value.code == "admission.receipt_kind_mismatch"
    assert tree(cache.root) == []
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    with pytest.raises(AdmissionError):
        cache.activate(release.bundle.release_id, receipt=target.materialization(release.bundle, release.authority))
    assert cache.current() is None


def tightened(authority, **limits):
    return authority.model_copy(update={"effective_limits": authority.effective_limits.model_copy(update=limits)})


@pytest.mark.parametrize("limits", [{"max_source_bytes": 100}, {"max_workloads": 3}])
def test_budget_is_reapplied_before_the_cache_write(cache, target, release, limits):
    receipt = target.materialization(release.bundle, release.authority)
    with pytest.raises(BudgetExceededError) as raised:
        cache.materialize(release.bundle, authority=tightened(release.authority, **limits), receipt=receipt)
    assert raised.value.code == "release.budget_exceeded"
    assert tree(cache.root) == []


def test_a_changed_epoch_refuses_a_receipt_issued_before_it(cache, target, release):
    receipt = target.materialization(release.bundle, release.authority)
    target.live.revocation_epoch += 1
    with pytest.raises(ActivationAuthorityError) as raised:
        cache.materialize(release.bundle, authority=release.authority, receipt=receipt)
    assert raised.value.code == "authority.activation_authority" and raised.value.reason == "epoch_changed"
    assert tree(cache.root) == []


def test_rollback_selects_the_previous_immutable_deployment(cache, target, release):
    install(cache, target, release)
    newer = synthetic_release(target, edit={"shop/models/orders.sql": b"select 2 as id\n"}, sequence=2)
    assert newer.bundle.release_id != release.bundle.release_id
    install(cache, target, newer)
    assert cache.previous_release() == release.bundle.release_id
    with pytest.raises(AdmissionError) as raised:
        cache.rollback(receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "admission.binding_mismatch" and cache.current().release_id == newer.bundle.release_id
    result = cache.rollback(receipt=target.activation(release.bundle, release.authority, purpose="rollback"))
    assert result.release_id == release.bundle.release_id and result.previous_release_id == newer.bundle.release_id
    assert [e.action for e in cache.audit_log()] == ["activate", "activate", "rollback"]
    assert cache.audit_log()[-1].authorized_by == "rollback"
    assert sorted(cache.deployments()) == sorted([release.bundle.release_id, newer.bundle.release_id])


def test_rollback_without_history_is_refused(cache, target, release):
    install(cache, target, release)
    with pytest.raises(ActivationError) as raised:
        cache.rollback(receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "release.no_previous_deployment"


def test_activation_refuses_a_tampered_deployment_before_any_change(cache, target, release):
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    member = next(p for p in (cache.root / "deployments").rglob("*.sql"))
    member.write_bytes(member.read_bytes() + b"-- tampered\n")
    with pytest.raises(IntegrityError) as raised:
        cache.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "release.integrity_mismatch"
    assert cache.current() is None and cache.pending() is None and cache.audit_log() == []


class FailAfterPreparation:
    """The live target check fails for every call made after preparation (a revocation mid-flight)."""

    def __init__(self, issuer):
        self.issuer = issuer

    def require_current(self, receipt, kind, **kwargs):
        if kwargs.get("after_preparation"):
            raise RecoveryRequiredError(AdmissionError("admission.expired", "revoked mid-flight"))
        return self.issuer.require_current(receipt, kind, **kwargs)


def test_a_failure_after_preparation_requires_recovery_which_completes_it(tmp_path, target, release):
    failing = ReleaseCache(tmp_path / "cache", admission=FailAfterPreparation(target.issuer), clock=target.clock)
    failing.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    with pytest.raises(RecoveryRequiredError) as raised:
        failing.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "authority.recovery_required"
    assert failing.current() is None and failing.pending() is not None
    healthy = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    with pytest.raises(ActivationError) as blocked:
        healthy.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert blocked.value.code == "release.activation_recovery_required"
    with pytest.raises(AdmissionError):
        healthy.recover(receipt=target.activation(release.bundle, release.authority, purpose="activate"))
    recovered = healthy.recover(
        receipt=target.activation(release.bundle, release.authority, purpose="pointer_recovery")
    )
    assert recovered.changed and healthy.current().release_id == release.bundle.release_id
    assert [(e.authorized_by, e.release_id) for e in healthy.audit_log()] == [
        ("pointer_recovery", release.bundle.release_id)
    ]
    assert healthy.pending() is None and healthy.recover(receipt=None) is None


def test_recovery_drops_a_torn_audit_line_and_re_appends_the_entry(tmp_path, target, release):
    class TornAppend(LocalFiles):
        def append(self, path, data):
            super().append(path, data[: len(data) // 2])
            raise OSError("power lost mid-append")

    torn = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock, files=TornAppend())
    torn.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )
    with pytest.raises(ActivationError):
        torn.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    healthy = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    with pytest.raises(ActivationError) as raised:
        healthy.audit_log()
    assert raised.value.code == "release.audit_log_corrupt"
    healthy.recover(receipt=target.activation(release.bundle, release.authority, purpose="pointer_recovery"))
    assert [e.release_id for e in healthy.audit_log()] == [release.bundle.release_id]
    assert healthy.current().release_id == release.bundle.release_id and healthy.pending() is None


def test_a_concurrently_prepared_activation_is_not_overwritten(cache, target, release):
    cache.materialize(
        release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority)
    )

    class Racing(LocalFiles):
        def create_exclusive(self, path, data):
            LocalFiles().create_exclusive(path, b"prepared by another process")
            super().create_exclusive(path, data)

    racing = ReleaseCache(cache.root, admission=target.issuer, clock=target.clock, files=Racing())
    with pytest.raises(ActivationError) as raised:
        racing.activate(release.bundle.release_id, receipt=target.activation(release.bundle, release.authority))
    assert raised.value.code == "release.activation_recovery_required"
    assert (cache.root / "activation.pending").read_bytes() == b"prepared by another process"
    assert cache.current() is None


def test_audit_only_repair_restores_a_lost_entry(cache, target, release):
    install(cache, target, release)
    (cache.root / "audit.log").write_bytes(b"")
    with pytest.raises(AdmissionError):
        cache.repair_audit(receipt=target.activation(release.bundle, release.authority, purpose="pointer_recovery"))
    entry = cache.repair_audit(receipt=target.activation(release.bundle, release.authority, purpose="audit_repair"))
    assert (entry.sequence, entry.authorized_by, entry.release_id) == (1, "audit_repair", release.bundle.release_id)
    assert (
        cache.repair_audit(receipt=target.activation(release.bundle, release.authority, purpose="audit_repair")) is None
    )


def test_an_edited_audit_entry_breaks_the_chain(cache, target, release):
    install(cache, target, release)
    newer = synthetic_release(target, edit={"shop/models/orders.sql": b"select 3 as id\n"}, sequence=2)
    install(cache, target, newer)
    lines = (cache.root / "audit.log").read_bytes().splitlines(keepends=True)
    (cache.root / "audit.log").write_bytes(lines[0].replace(b"2026-01-05", b"2026-01-04") + lines[1])
    with pytest.raises(ActivationError) as raised:
        cache.audit_log()
    assert raised.value.code == "release.audit_log_corrupt"


def test_expired_authority_blocks_new_attempts_but_evidence_stays_readable(cache, target, release):
    install(cache, target, release)
    target.clock.moment = target.clock.moment + timedelta(days=2)
    with pytest.raises(AdmissionError) as raised:
        target.activation(release.bundle, release.authority)
    assert raised.value.code == "admission.expired"
    assert cache.current().release_id == release.bundle.release_id
    assert cache.load(release.bundle.release_id).record.authority_expires_at == release.authority.expires_at
    assert len(cache.audit_log()) == 1


class FaultyFiles(LocalFiles):
    """The real filesystem, except that the n-th write operation raises."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at, self.count = fail_at, 0

    def _tick(self):
        self.count += 1
        if self.count == self.fail_at:
            raise OSError("injected disk failure")

    def make_dirs(self, path):
        self._tick()
        super().make_dirs(path)

    def write_new(self, path, data):
        self._tick()
        super().write_new(path, data)

    def write_unsynced(self, path, data):
        self._tick()
        super().write_unsynced(path, data)

    def sync_tree(self, root):
        self._tick()
        super().sync_tree(root)

    def replace(self, path, data):
        self._tick()
        super().replace(path, data)

    def append(self, path, data):
        self._tick()
        super().append(path, data)

    def create_exclusive(self, path, data):
        self._tick()
        super().create_exclusive(path, data)

    def rename_new(self, source, target):
        self._tick()
        super().rename_new(source, target)

    def remove(self, path):
        self._tick()
        super().remove(path)


def test_a_failure_at_every_install_write_point_never_succeeds_and_converges(tmp_path, target, release):
    counter = FaultyFiles(fail_at=0)
    install(
        ReleaseCache(tmp_path / "count", admission=target.issuer, clock=target.clock, files=counter), target, release
    )
    assert counter.count >= len(release.bundle.members) + 6
    for fail_at in range(1, counter.count + 1):
        root = tmp_path / f"cache-{fail_at}"
        faulty = ReleaseCache(root, admission=target.issuer, clock=target.clock, files=FaultyFiles(fail_at))
        with pytest.raises((DurabilityUncertainError, ActivationError)) as raised:
            install(faulty, target, release)
        assert raised.value.code in {"release.durability_uncertain", "release.activation_recovery_required"}
        healthy = ReleaseCache(root, admission=target.issuer, clock=target.clock)
        if healthy.pending() is not None:
            healthy.recover(receipt=target.activation(release.bundle, release.authority, purpose="pointer_recovery"))
        if healthy.current() is None:
            install(healthy, target, release)
        assert healthy.current().release_id == release.bundle.release_id
        assert [e.release_id for e in healthy.audit_log()] == [release.bundle.release_id]
        assert healthy.pending() is None
        assert healthy.load(release.bundle.release_id).bundle.release_id == release.bundle.release_id
