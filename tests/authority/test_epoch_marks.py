"""Issue 20 item 4: the revocation epoch has a high-water mark, persisted beside the grant sequence.

Rolling the epoch source back (1 -> 0) must not re-accept a grant epoch 1 revoked, nor revive an
operation receipt epoch 1 refused: both are `authority.epoch_rollback`. The mark lives in the
accepted-sequence store (in memory, or the control store's `revocation_epoch_marks` table).
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from dpone_dagster.authority.memory import ControllableCurrentTarget, InMemoryAcceptedSequenceStore
from dpone_dagster.authority.sql_sequences import SqlAcceptedSequenceStore
from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_source
from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.receipts import PublicationReceipt
from dpone_dagster.contracts.target import DeploymentProjection, TargetConfiguration
from dpone_dagster.control.store import open_store, reset_store_cache
from dpone_dagster.errors import DponeError

POLICY = digest("dpone.development-policy.v1", {"p": 1})
RELEASE_ID = digest("dpone.release-set.v3.development_workspace_delivery_v1", {"synthetic": "release"})


def _sqlite(tmp_path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{tmp_path / 'control.sqlite'}")


def _code(call) -> str:
    with pytest.raises(DponeError) as raised:
        call()
    return raised.value.code


def _verify(authority: SyntheticAuthority):
    grant_bytes, signatures = authority.signed()
    return verify_grant(
        grant_bytes,
        signatures,
        pinned_policy_digest=authority.policy_digest,
        source=synthetic_source(),
        ports=authority.ports,
    )


@pytest.fixture(params=["memory", "sqlite"])
def marks(request, tmp_path):
    return InMemoryAcceptedSequenceStore() if request.param == "memory" else SqlAcceptedSequenceStore(_sqlite(tmp_path))


def test_the_mark_only_rises(marks) -> None:
    assert marks.raise_epoch(POLICY, "env-a", 0) == 0
    assert marks.raise_epoch(POLICY, "env-a", 2) == 2
    assert marks.raise_epoch(POLICY, "env-a", 1) == 2
    assert marks.raise_epoch(POLICY, "env-b", 0) == 0


def test_concurrent_raises_keep_the_highest(marks) -> None:
    barrier = threading.Barrier(6)

    def worker(epoch: int) -> None:
        barrier.wait()
        marks.raise_epoch(POLICY, "env-c", epoch)

    threads = [threading.Thread(target=worker, args=(epoch,)) for epoch in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert marks.raise_epoch(POLICY, "env-c", 0) == 5


def test_the_mark_survives_a_restart_beside_the_sequences(tmp_path) -> None:
    SqlAcceptedSequenceStore(_sqlite(tmp_path)).raise_epoch(POLICY, "env-a", 3)
    assert SqlAcceptedSequenceStore(_sqlite(tmp_path)).raise_epoch(POLICY, "env-a", 0) == 3
    reset_store_cache()
    tables = set(sa.inspect(open_store(f"sqlite:///{tmp_path / 'store.sqlite'}")).get_table_names())
    assert {"accepted_grant_sequences", "revocation_epoch_marks"} <= tables
    reset_store_cache()


def test_a_revoked_grant_is_not_accepted_again_after_the_epoch_is_rolled_back(authority) -> None:
    assert _verify(authority).revocation_epoch == 0
    authority.epochs.revoke()
    assert _code(lambda: _verify(authority)) == "authority.revoked"
    authority.epochs.epoch = 0
    assert _code(lambda: _verify(authority)) == "authority.epoch_rollback"


def test_a_rollback_unobserved_by_verification_is_still_caught_by_admission_and_the_reverse(authority) -> None:
    """One store is the memory of both paths: what admission observed, verification honours."""
    _verify(authority)
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    live = ControllableCurrentTarget(authority.policy_digest, revocation_epoch=2)
    issuer = ReceiptIssuer(target, live, authority.clock, epoch_marks=authority.sequences)
    issuer.issue_cleanup()  # observes epoch 2
    assert _code(lambda: _verify(authority)) == "authority.epoch_rollback"  # the epoch source still says 0


def test_a_refused_receipt_is_not_revived_by_rolling_the_epoch_back(authority) -> None:
    verified = _verify(authority)
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    live = ControllableCurrentTarget(authority.policy_digest)
    issuer = ReceiptIssuer(target, live, authority.clock, epoch_marks=authority.sequences)
    projection = DeploymentProjection(
        release_id=RELEASE_ID,
        deployment_id="synthetic-dev:1",
        environment="synthetic-dev",
        trust_tier="non_production",
        grant_digest=verified.grant_digest,
    )
    receipt = issuer.issue_publication(verified, projection)
    admit = dict(release_id=RELEASE_ID, deployment_id="synthetic-dev:1", authority=verified)
    assert issuer.require_current(receipt, PublicationReceipt, **admit) is receipt
    live.revocation_epoch = 1
    assert (
        _code(lambda: issuer.require_current(receipt, PublicationReceipt, **admit)) == "authority.activation_authority"
    )
    live.revocation_epoch = 0
    assert _code(lambda: issuer.require_current(receipt, PublicationReceipt, **admit)) == "authority.epoch_rollback"
    assert (
        _code(lambda: issuer.require_current(receipt, PublicationReceipt, after_preparation=True, **admit))
        == "authority.recovery_required"
    )
    assert _code(issuer.issue_cleanup) == "authority.epoch_rollback"


def test_a_durable_mark_is_shared_by_every_issuer_of_the_target(authority, tmp_path) -> None:
    verified = _verify(authority)
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    live = ControllableCurrentTarget(authority.policy_digest, revocation_epoch=1)
    ReceiptIssuer(
        target, live, authority.clock, epoch_marks=SqlAcceptedSequenceStore(_sqlite(tmp_path))
    ).issue_cleanup()
    live.revocation_epoch = 0
    later = ReceiptIssuer(target, live, authority.clock, epoch_marks=SqlAcceptedSequenceStore(_sqlite(tmp_path)))
    projection = DeploymentProjection(
        release_id=RELEASE_ID,
        deployment_id="synthetic-dev:1",
        environment="synthetic-dev",
        trust_tier="non_production",
        grant_digest=verified.grant_digest,
    )
    assert _code(lambda: later.issue_publication(verified, projection)) == "authority.epoch_rollback"
