"""End to end on the synthetic source repository: real dbt compile, real flow capture, both registries."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from dpone_dagster.authority.synthetic import SYNTHETIC_COMMIT, SYNTHETIC_REPOSITORY
from dpone_dagster.authority.target_admission import ActivationAuthorityError, AdmissionError
from dpone_dagster.contracts.grant import ExecutionSubject
from dpone_dagster.control.store import open_store
from dpone_dagster.release.build.native import compile_native
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore, S3Store
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.inspection import inspect_release, release_summary
from dpone_dagster.release.pipeline import ReleasePipeline, SourceIdentity
from dpone_dagster.release.runtime.admission import DenialReason, RuntimeTask, TaskKind
from dpone_dagster.release.source.snapshot import open_source
from dpone_dagster.release.state import ReleaseState, ReleaseStateMachine
from tests.release.fabricated import SyntheticTarget

SYNTHETIC = Path(__file__).resolve().parents[2] / "dbt_project_synthetic"
IDENTITY = SourceIdentity(SYNTHETIC_REPOSITORY, SYNTHETIC_COMMIT)


@pytest.fixture(scope="module")
def source(real_compile):
    """The session's one real compile of the synthetic project (tests/release/conftest.py); read-only."""
    return real_compile.tree, real_compile.native


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalDirectoryStore(tmp_path / "registry")
    return S3Store(request.getfixturevalue("s3_server").client(), request.getfixturevalue("s3_bucket"), "releases")


class Delivery:
    """One synthetic target with a pipeline over the given registry store."""

    def __init__(self, store, root: Path, tree, native) -> None:
        self.target = SyntheticTarget()
        self.tree, self.native = tree, native
        self.store = store
        self.pipeline = ReleasePipeline(
            authority_ports=self.target.authority.ports,
            pinned_policy_digest=self.target.authority.policy_digest,
            registry=ReleaseRegistry(store),
            cache=ReleaseCache(root / "cache", admission=self.target.issuer, clock=self.target.clock),
            admission=self.target.issuer,
            clock=self.target.clock,
            states=ReleaseStateMachine(open_store(f"sqlite:///{root / 'control.sqlite'}"), self.target.clock),
        )

    def compose(self, **grant_overrides):
        ordinary = self.pipeline.capture_ordinary(self.tree)
        reconstructed = self.pipeline.reconstruct(IDENTITY, self.native, ordinary)
        grant_bytes, signatures = self.target.signed_grant(
            native=reconstructed.native_membership,
            ordinary=reconstructed.ordinary_membership,
            execution_subjects=[ExecutionSubject(**s) for s in ordinary.execution_subjects()],
            **grant_overrides,
        )
        self.authority = self.pipeline.verify_authority(grant_bytes, signatures, reconstructed)
        self.bundle = self.pipeline.compose(
            authority=self.authority, source=self.tree, native=self.native, ordinary=ordinary
        )
        return self.bundle

    def publish(self):
        return self.pipeline.publish(
            self.bundle, authority=self.authority, receipt=self.target.publication(self.bundle, self.authority)
        )

    def install(self):
        return self.pipeline.install(
            self.bundle.release_id,
            authority=self.authority,
            materialization=self.target.materialization(self.bundle, self.authority),
            activation=self.target.activation(self.bundle, self.authority),
        )

    def tasks(self):
        native = RuntimeTask(TaskKind.NATIVE, self.bundle.native_membership[0])
        hooked = next(w for w in self.bundle.ordinary if w.hooks)
        return [
            native,
            RuntimeTask(TaskKind.ORDINARY, hooked.pack_id),
            RuntimeTask(TaskKind.PRE_HOOK, hooked.pack_id, hooked.hooks[0].hook_id),
        ]


@pytest.fixture
def delivery(store, tmp_path, source):
    tree, native = source
    return Delivery(store, tmp_path, tree, native)


@pytest.fixture
def local(tmp_path, source):
    tree, native = source
    return Delivery(LocalDirectoryStore(tmp_path / "registry"), tmp_path, tree, native)


def test_the_synthetic_parent_publishes_installs_and_every_task_is_denied(delivery):
    bundle = delivery.compose()
    assert len(bundle.native_membership) == 11 and len(bundle.ordinary_membership) >= 3
    assert any(len(w.hook_order) >= 2 for w in bundle.ordinary)
    published = delivery.publish()
    assert published.release_id == bundle.release_id and not published.already_published
    assert delivery.pipeline.registry.releases() == [bundle.release_id]
    installed = delivery.install()
    assert installed.changed and delivery.pipeline.cache.current().release_id == bundle.release_id
    for task in delivery.tasks():
        denial = delivery.pipeline.admit(bundle.release_id, task)
        assert denial.reason is DenialReason.DEVELOPMENT_DORMANT
        assert denial.authority_expires_at == delivery.authority.expires_at
    history = delivery.pipeline.states.history(bundle.release_id)
    assert [e.to_state for e in history if e.outcome == "recorded"] == [
        ReleaseState.CHECKED,
        ReleaseState.COMPOSED,
        ReleaseState.PUBLISHED,
        ReleaseState.INSTALLED,
        ReleaseState.DENIED,
    ]


def test_an_identical_retry_changes_no_bytes_and_returns_to_denied(delivery):
    first = delivery.compose()
    delivery.publish()
    delivery.install()
    delivery.pipeline.admit(first.release_id, delivery.tasks()[0])
    keys = sorted(delivery.store.keys())
    again = delivery.compose()
    assert again.release_id == first.release_id
    assert delivery.publish().bytes_written == 0
    retried = delivery.install()
    assert not retried.changed and retried.audit_sequence == 1
    assert sorted(delivery.store.keys()) == keys
    assert delivery.pipeline.states.current(first.release_id) is ReleaseState.INSTALLED
    delivery.pipeline.admit(first.release_id, delivery.tasks()[1])
    assert delivery.pipeline.states.current(first.release_id) is ReleaseState.DENIED
    assert len(delivery.pipeline.cache.audit_log()) == 1


def test_expiry_blocks_new_attempts_while_history_stays_readable(local, tmp_path):
    bundle = local.compose()
    stale_receipt = local.target.publication(bundle, local.authority)
    local.publish()
    local.install()
    local.target.clock.moment += timedelta(days=2)
    with pytest.raises(AdmissionError) as raised:
        local.target.materialization(bundle, local.authority)
    assert raised.value.code == "admission.expired"
    with pytest.raises(AdmissionError):
        local.pipeline.publish(bundle, authority=local.authority, receipt=stale_receipt)
    assert local.pipeline.admit(bundle.release_id, local.tasks()[0]).reason is DenialReason.AUTHORITY_EXPIRED
    refused = [e for e in local.pipeline.states.history(bundle.release_id) if e.outcome == "refused"]
    assert refused and '"admission.expired"' in refused[-1].detail
    shown = release_summary(
        inspect_release(local.pipeline.cache.root / "deployments" / bundle.release_id[7:]), local.target.clock.now()
    )
    assert shown["authority_expired"] is True and shown["release_id"] == bundle.release_id
    assert local.pipeline.registry.fetch(bundle.release_id).release_id == bundle.release_id


def test_revocation_blocks_new_attempts_and_changes_the_denial(local):
    bundle = local.compose()
    local.publish()
    stale = local.target.materialization(bundle, local.authority)
    local.install()
    local.target.authority.epochs.revoke()
    local.target.live.revocation_epoch += 1
    assert local.pipeline.admit(bundle.release_id, local.tasks()[2]).reason is DenialReason.AUTHORITY_REVOKED
    with pytest.raises(ActivationAuthorityError) as raised:
        local.pipeline.cache.materialize(bundle, authority=local.authority, receipt=stale)
    assert raised.value.reason == "epoch_changed"
    with pytest.raises(ActivationAuthorityError):
        local.target.activation(bundle, local.authority)
    assert local.pipeline.cache.current().release_id == bundle.release_id


def test_a_changed_model_gives_a_new_identity(tmp_path, local):
    original = local.compose().release_id
    changed_root = tmp_path / "changed"
    shutil.copytree(SYNTHETIC, changed_root, ignore=shutil.ignore_patterns("target", "logs"))
    model = changed_root / "models" / "marts" / "daily_revenue.sql"
    model.write_text(model.read_text() + "\n-- a reviewed change\n")
    with open_source(changed_root, work_dir=tmp_path) as changed_tree:
        other = Delivery(
            LocalDirectoryStore(tmp_path / "other"), tmp_path / "other-root", changed_tree, compile_native(changed_tree)
        )
        changed = other.compose().release_id
    assert changed != original


def test_a_changed_flow_sql_fails_closed_against_its_committed_pack(tmp_path, local):
    changed_root = tmp_path / "changed"
    shutil.copytree(SYNTHETIC, changed_root, ignore=shutil.ignore_patterns("target", "logs"))
    sql = next((changed_root / "flows").rglob("*.sql"))
    sql.write_text(sql.read_text() + "\n-- drift\n")
    with open_source(changed_root, work_dir=tmp_path) as changed_tree, pytest.raises(Exception) as raised:
        local.pipeline.capture_ordinary(changed_tree)
    assert raised.value.code.startswith("flows.")
    assert list(local.store.keys()) == []
