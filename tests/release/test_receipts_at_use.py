"""Issue 20 item 3: receipts prove themselves, at every protected operation.

Found by grepping the receipt checks (`require_current`, `require_cleanup`, `_issue`): publication
(`ReleaseRegistry.publish`), materialization, activation, rollback, pointer recovery and audit-only
repair (`ReleaseCache`), cleanup (`ReceiptIssuer.require_cleanup`, what `gc` runs under) and receipt
issuance itself (it takes the authority receipt). Runtime admission takes no receipt: it decides on
the installed deployment record's authority fields, which `test_deployment_record.py` proves bound.

Each operation is tried with a receipt that is hand-built (valid fields, never issued), re-dated
(expiring in 365 days, past the grant's expiry), re-targeted (naming another grant digest), and a
genuine one used with the clock set before its verification time; each is refused and nothing is
written. The checks behind the seal (lifetime, clamp, grant digest) are also proven on their own,
with copies re-sealed in-process as a faulty issuer would produce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from dpone_dagster.authority.receipt_seal import PROCESS_SEAL
from dpone_dagster.contracts.bounds import format_timestamp, parse_timestamp
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt
from dpone_dagster.errors import DponeError
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.source.local_files import LocalFiles
from tests.release.fabricated import SyntheticRelease, SyntheticTarget, synthetic_release

OTHER_GRANT = digest("dpone.development-authority.v1", {"another": "grant"})


def hand_built(receipt):
    """The same fields, built directly: never issued, so unsealed."""
    return type(receipt)(**receipt.model_dump())


def re_dated(receipt):
    return receipt.model_copy(
        update={"expires_at": format_timestamp(parse_timestamp(receipt.verified_at) + timedelta(days=365))}
    )


def re_targeted(receipt):
    return receipt.model_copy(update={"grant_digest": OTHER_GRANT})


FORGERIES: dict[str, Callable] = {"hand_built": hand_built, "re_dated": re_dated, "re_targeted": re_targeted}


class FailsAtPointerCommit(LocalFiles):
    def replace(self, path: Path, data: bytes) -> None:
        raise OSError("injected: the pointer commit fails")


@dataclass
class Delivery:
    """One synthetic target with a registry and a cache; `state()` is everything they hold."""

    target: SyntheticTarget
    registry: ReleaseRegistry
    cache: ReleaseCache
    release: SyntheticRelease

    def state(self) -> dict[str, bytes]:
        roots = (self.registry.store.root, self.cache.root)
        return {
            str(p): p.read_bytes() for root in roots if root.exists() for p in sorted(root.rglob("*")) if p.is_file()
        }

    def materialize(self, release: SyntheticRelease | None = None) -> None:
        release = release or self.release
        self.cache.materialize(
            release.bundle,
            authority=release.authority,
            receipt=self.target.materialization(release.bundle, release.authority),
        )

    def install(self, release: SyntheticRelease) -> None:
        self.materialize(release)
        self.cache.activate(
            release.bundle.release_id, receipt=self.target.activation(release.bundle, release.authority)
        )


@pytest.fixture
def delivery(tmp_path, target, release) -> Delivery:
    registry = ReleaseRegistry(LocalDirectoryStore(tmp_path / "registry"))
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    return Delivery(target, registry, cache, release)


def _publish(d: Delivery):
    """(genuine receipt, the protected operation given a receipt)."""
    bundle, authority = d.release.bundle, d.release.authority
    return d.target.publication(bundle, authority), lambda r: d.registry.publish(
        bundle, authority=authority, receipt=r, admission=d.target.issuer
    )


def _materialize(d: Delivery):
    bundle, authority = d.release.bundle, d.release.authority
    return d.target.materialization(bundle, authority), lambda r: d.cache.materialize(
        bundle, authority=authority, receipt=r
    )


def _activate(d: Delivery):
    d.materialize()
    return d.target.activation(d.release.bundle, d.release.authority), lambda r: d.cache.activate(
        d.release.bundle.release_id, receipt=r
    )


def _rollback(d: Delivery):
    d.install(d.release)
    d.install(synthetic_release(d.target, edit={"shop/models/orders.sql": b"select 2 as id\n"}, sequence=2))
    # the earlier release's grant (sequence 1) is older than the one just accepted: issue its receipt directly
    projection = d.target.projection(d.release.bundle, d.release.authority)
    receipt = d.target.issuer.issue_activation(d.release.authority, projection, purpose="rollback")
    return receipt, lambda r: d.cache.rollback(receipt=r)


def _recover(d: Delivery):
    d.materialize()
    failing = ReleaseCache(d.cache.root, admission=d.target.issuer, clock=d.target.clock, files=FailsAtPointerCommit())
    with pytest.raises(DponeError):
        failing.activate(
            d.release.bundle.release_id, receipt=d.target.activation(d.release.bundle, d.release.authority)
        )
    assert d.cache.pending() is not None
    return d.target.activation(d.release.bundle, d.release.authority, "pointer_recovery"), lambda r: d.cache.recover(
        receipt=r
    )


def _repair_audit(d: Delivery):
    d.install(d.release)
    (d.cache.root / "audit.log").write_bytes(b"")
    return d.target.activation(d.release.bundle, d.release.authority, "audit_repair"), lambda r: d.cache.repair_audit(
        receipt=r
    )


def _cleanup(d: Delivery):
    return d.target.issuer.issue_cleanup(), lambda r: d.target.issuer.require_cleanup(r)


OPERATIONS = {
    "publish": _publish,
    "materialize": _materialize,
    "activate": _activate,
    "rollback": _rollback,
    "recover": _recover,
    "repair_audit": _repair_audit,
    "cleanup": _cleanup,
}


def _refused(call, code: str) -> DponeError:
    with pytest.raises(DponeError) as raised:
        call()
    assert raised.value.code == code, raised.value
    return raised.value


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_forged_receipt_is_refused_and_nothing_is_written(delivery, operation, forgery):
    genuine, protected = OPERATIONS[operation](delivery)
    if forgery == "re_targeted" and operation == "cleanup":
        pytest.skip("a cleanup receipt binds no grant")
    before = delivery.state()
    _refused(lambda: protected(FORGERIES[forgery](genuine)), "admission.receipt_unauthenticated")
    assert delivery.state() == before
    assert protected(genuine) is not None or operation in {"recover", "repair_audit"}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_genuine_receipt_is_refused_before_its_verification_time(delivery, operation):
    genuine, protected = OPERATIONS[operation](delivery)
    delivery.target.clock.moment = parse_timestamp(genuine.verified_at) - timedelta(seconds=1)
    before = delivery.state()
    _refused(lambda: protected(genuine), "admission.used_before_verification")
    assert delivery.state() == before


def test_a_hand_built_authority_receipt_issues_nothing_and_admits_nothing(delivery):
    bundle, authority = delivery.release.bundle, delivery.release.authority
    forged = DevelopmentAuthorityReceipt(**authority.model_dump())
    projection = delivery.target.projection(bundle, authority)
    for issue in (delivery.target.issuer.issue_publication, delivery.target.issuer.issue_materialization):
        _refused(lambda: issue(forged, projection), "admission.receipt_unauthenticated")
    genuine = delivery.target.publication(bundle, authority)
    _refused(
        lambda: delivery.registry.publish(bundle, authority=forged, receipt=genuine, admission=delivery.target.issuer),
        "admission.receipt_unauthenticated",
    )
    _refused(
        lambda: delivery.cache.materialize(
            bundle, authority=forged, receipt=delivery.target.materialization(bundle, authority)
        ),
        "admission.receipt_unauthenticated",
    )
    assert delivery.state() == {}


def test_a_receipt_issued_under_another_grant_does_not_admit_this_release(delivery):
    """Sealed, but issued for this release under a second verified grant: the grant digest decides."""
    bundle, authority = delivery.release.bundle, delivery.release.authority
    other = delivery.target.verify(
        native=authority.native_membership,
        ordinary=authority.ordinary_membership,
        source_bytes=bundle.source_bytes,
        sequence=2,
    )
    projection = delivery.target.projection(bundle, authority).model_copy(update={"grant_digest": other.grant_digest})
    receipt = delivery.target.issuer.issue_publication(other, projection)
    _refused(
        lambda: delivery.registry.publish(
            bundle, authority=authority, receipt=receipt, admission=delivery.target.issuer
        ),
        "admission.binding_mismatch",
    )
    assert delivery.state() == {}


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"expires_at": "2026-01-05T12:00:00Z"}, "admission.receipt_lifetime_exceeded"),  # 2 h from a 1 h issuer
        ({"grant_digest": OTHER_GRANT}, "admission.binding_mismatch"),
    ],
)
def test_checks_behind_the_seal_hold_on_their_own(delivery, change, code):
    """A copy re-sealed in this process (a faulty issuer) is still refused by the field checks."""
    genuine, protected = _publish(delivery)
    _refused(lambda: protected(PROCESS_SEAL.seal(genuine.model_copy(update=change))), code)
    assert delivery.state() == {}


def test_the_clamp_to_the_grant_expiry_holds_on_its_own(delivery):
    """Issued 30 minutes before the grant expires: the receipt ends with the grant; 15 minutes more is refused."""
    grant_expiry = parse_timestamp(delivery.release.authority.expires_at)
    delivery.target.clock.moment = grant_expiry - timedelta(minutes=30)
    genuine, protected = _publish(delivery)
    assert genuine.expires_at == delivery.release.authority.expires_at
    stretched = PROCESS_SEAL.seal(
        genuine.model_copy(update={"expires_at": format_timestamp(grant_expiry + timedelta(minutes=15))})
    )
    _refused(lambda: protected(stretched), "admission.receipt_outlives_grant")
    assert delivery.state() == {}
