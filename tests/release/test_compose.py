"""Composition of the development parent: identity, refusals, and full bundle verification."""

from __future__ import annotations

import pytest

from devtools.synthetic_documents import synthetic_documents
from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.flows import CapturedHook
from dpone_dagster.contracts.release_documents import DbtDevelopmentReleaseSet
from dpone_dagster.release.build.bundle import PARENT_PATH, open_bundle, release_id_of
from dpone_dagster.release.build.compose import compose_release
from dpone_dagster.release.errors import (
    BudgetExceededError,
    IntegrityError,
    LogicalWriteCollisionError,
    MembershipError,
    SourceClosureError,
)
from tests.release.fabricated import (
    MemorySource,
    SyntheticTarget,
    synthetic_capture,
    synthetic_release,
)


def recompose(release, **changes):
    arguments = {
        "authority": release.authority,
        "source": release.source,
        "native": release.native,
        "ordinary": release.ordinary,
    }
    arguments.update(changes)
    return compose_release(**arguments)


def test_the_parent_is_a_dormant_development_delivery(release):
    parent = release.bundle.parent
    assert (parent.schema_, parent.profile) == ("dpone.release-set.v3", "development_workspace_delivery_v1")
    assert (parent.authority_family, parent.trust_tier, parent.delivery_status) == (
        "development",
        "non_production",
        "delivered_dormant",
    )
    assert parent.route_certifications == ()
    assert (parent.policy_digest, parent.grant_digest) == (
        release.authority.policy_digest,
        release.authority.grant_digest,
    )
    assert parent.execution_subjects == release.authority.execution_subjects
    assert release.bundle.release_id == release_id_of(parent)
    assert release_id_of(parent).startswith("sha256:") and parent.identity_kind().endswith(parent.profile)
    [native] = release.bundle.native
    assert all(project.route_certifications == () for project in native.projects)
    assert native.source_snapshot_digest == release.source.snapshot.digest
    assert {s.path for s in parent.source_sidecars} == set(release.source.files)


def test_one_hundred_builds_from_identical_inputs_give_one_identity(target):
    identities = {synthetic_release(target).bundle.release_id for _ in range(100)}
    assert len(identities) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"edit": {"shop/models/orders.sql": b"select 42 as id\n"}},
        {"edit": {"flows/transfer/sql/run.sql": b"insert into raw.transfer select 2;\n"}},
        {"models": {"orders": "marts.orders_v2", "customers": "marts.customers"}},
        {"sequence": 2},
        {"expires_at": "2026-01-06T08:00:00Z"},
    ],
    ids=["native-source", "ordinary-source", "projection", "grant-sequence", "grant-window"],
)
def test_any_changed_input_changes_the_identity(release, change):
    assert synthetic_release(SyntheticTarget(), **change).bundle.release_id != release.bundle.release_id


def test_a_changed_command_changes_the_identity(release):
    workload = release.ordinary.workloads[0]
    changed = workload.model_copy(update={"runtime_command": (*workload.runtime_command, "--dry-run")})
    ordinary = synthetic_capture(release.source.snapshot.digest, [changed, *release.ordinary.workloads[1:]])
    assert recompose(release, ordinary=ordinary).release_id != release.bundle.release_id


def test_nothing_to_deliver_is_refused(release):
    with pytest.raises(MembershipError) as raised:
        recompose(release, native=None, ordinary=None)
    assert raised.value.code == "release.membership_empty"


def test_membership_must_equal_the_grant(target, release):
    other = synthetic_release(target, workloads={"transfer": (("raw.transfer",), ())}, sequence=2)
    with pytest.raises(MembershipError) as raised:
        recompose(release, authority=other.authority)
    assert raised.value.code == "release.membership_mismatch"
    with pytest.raises(MembershipError):
        recompose(release, native=None)


def test_a_native_and_an_ordinary_write_of_one_relation_collide(target):
    with pytest.raises(LogicalWriteCollisionError) as raised:
        synthetic_release(target, workloads={"transfer": (("marts.orders",), ())})
    assert raised.value.code == "release.logical_write_collision"


def test_two_ordinary_writes_of_one_relation_collide(target):
    with pytest.raises(LogicalWriteCollisionError):
        synthetic_release(target, models=None, workloads={"a": (("raw.t",), ()), "b": (("raw.t",), ())})


def test_duplicate_selectors_are_refused(release):
    first, second = release.ordinary.workloads
    clash = second.model_copy(update={"selector": first.selector})
    with pytest.raises(Exception) as raised:
        recompose(release, ordinary=synthetic_capture(release.source.snapshot.digest, [first, clash]))
    assert raised.value.code in {"release.membership_duplicate", "contract.invalid"}


def test_the_combined_budget_is_applied(target, release):
    tight = release.authority.model_copy(
        update={"effective_limits": release.authority.effective_limits.model_copy(update={"max_source_bytes": 10})}
    )
    with pytest.raises(BudgetExceededError) as raised:
        recompose(release, authority=tight)
    assert raised.value.code == "release.budget_exceeded"


def test_source_drift_after_capture_is_refused(release):
    drifted = MemorySource({**release.source.files, "flows/transfer/sql/run.sql": b"drop table everything;\n"})
    with pytest.raises(SourceClosureError) as raised:
        recompose(release, source=drifted)
    assert raised.value.code == "release.source_closure_mismatch"


def test_native_and_ordinary_from_different_snapshots_are_refused(release):
    ordinary = synthetic_capture("sha256:" + "1" * 64, release.ordinary.workloads)
    with pytest.raises(SourceClosureError):
        recompose(release, ordinary=ordinary)


def test_ordinary_only_release_without_dbt(target):
    only = synthetic_release(target, models=None, workloads={"solo": (("raw.solo",), ("one",))})
    assert only.bundle.native == () and only.bundle.ordinary_membership == ("solo",)


@pytest.mark.parametrize("prefix", ["release.json", "native/", "ordinary/", "sources/"])
def test_one_changed_byte_in_any_member_is_detected(release, prefix):
    members = dict(release.bundle.members)
    path = next(p for p in sorted(members) if p.startswith(prefix))
    data = bytearray(members[path])
    data[len(data) // 2] ^= 0x01
    members[path] = bytes(data)
    with pytest.raises(Exception) as raised:
        open_bundle(members, expected_release_id=release.bundle.release_id)
    assert raised.value.code in {"release.integrity_mismatch", "release.not_development_family"}


def test_extra_or_missing_members_are_detected(release):
    members = dict(release.bundle.members)
    with pytest.raises(IntegrityError):
        open_bundle({**members, "sources/extra.sql": b"select 1"})
    members.pop(next(p for p in members if p.startswith("sources/")))
    with pytest.raises(IntegrityError):
        open_bundle(members)


def test_a_production_or_synthetic_parent_is_not_a_development_release():
    documents = synthetic_documents()
    for key in ("dpone.release-set.v2", "dpone.release-set.v3.synthetic_composition_validation"):
        with pytest.raises(IntegrityError) as raised:
            open_bundle({PARENT_PATH: documents[key].canonical_bytes()})
        assert raised.value.code == "release.not_development_family"


def test_a_native_constituent_from_another_grant_is_detected(target, release):
    [native] = release.bundle.native
    forged = DbtDevelopmentReleaseSet(**{**native.model_dump(by_alias=True), "grant_digest": "sha256:" + "f" * 64})
    members = dict(release.bundle.members)
    members[next(p for p in members if p.startswith("native/") and p.count("/") == 1)] = forged.canonical_bytes()
    with pytest.raises(IntegrityError):
        open_bundle(members)


def test_a_pre_hook_that_publishes_xcom_cannot_enter_a_release(release):
    hook = next(w for w in release.ordinary.workloads if w.hooks).hooks[0]
    assert hook.publish_xcom is False
    with pytest.raises(ContractError):
        CapturedHook(**{**hook.model_dump(by_alias=True), "publish_xcom": True})
