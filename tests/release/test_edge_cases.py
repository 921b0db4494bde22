"""Every edge case of the design document, each with its stable code and an untouched releases area.

Design, "Edge cases", in order. A refusal must leave the registry's `releases/` area (and, for
refusals before publication, the whole registry) empty.
"""

from __future__ import annotations

import inspect
import io
import shutil
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpone_dagster.authority.synthetic import SYNTHETIC_COMMIT, SYNTHETIC_REPOSITORY
from dpone_dagster.authority.target_admission import AdmissionError
from dpone_dagster.authority.verification import ReconstructedSource, verify_grant
from dpone_dagster.cli import app as dpone_app
from dpone_dagster.contracts.canonical import dumps, loads
from dpone_dagster.contracts.grant import ExecutionSubject
from dpone_dagster.contracts.receipts import PublicationReceipt
from dpone_dagster.release.build.bundle import PARENT_PATH
from dpone_dagster.release.build.compose import compose_release
from dpone_dagster.release.build.native import compile_native
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import RELEASES, ReleaseRegistry
from dpone_dagster.release.pipeline import ReleasePipeline, SourceIdentity
from dpone_dagster.release.runtime.admission import (
    ExecutionDeniedError,
    RuntimeTask,
    StandardRuntimeLauncher,
    TaskKind,
    admission_view,
)
from dpone_dagster.release.source.snapshot import open_source
from tests.release.fabricated import SyntheticTarget, synthetic_release

FLOWS = Path(__file__).resolve().parents[2] / "dbt_project_synthetic" / "flows"


class Site:
    """A synthetic target with an empty local registry and cache, and a pipeline over them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.target = SyntheticTarget()
        self.store = LocalDirectoryStore(root / "registry")
        self.pipeline = ReleasePipeline(
            authority_ports=self.target.authority.ports,
            pinned_policy_digest=self.target.authority.policy_digest,
            registry=ReleaseRegistry(self.store),
            cache=ReleaseCache(root / "cache", admission=self.target.issuer, clock=self.target.clock),
            admission=self.target.issuer,
            clock=self.target.clock,
        )

    def publish(self, release, receipt="issue"):
        if receipt == "issue":
            receipt = self.target.publication(release.bundle, release.authority)
        return self.pipeline.publish(release.bundle, authority=release.authority, receipt=receipt)

    def install(self, release):
        return self.pipeline.install(
            release.bundle.release_id,
            authority=release.authority,
            materialization=self.target.materialization(release.bundle, release.authority),
            activation=self.target.activation(release.bundle, release.authority),
        )

    def releases_area(self) -> list[str]:
        return list(self.store.keys(RELEASES))

    def everything(self) -> list[str]:
        return list(self.store.keys())


@pytest.fixture
def site(tmp_path):
    return Site(tmp_path)


def refused(call, code: str):
    with pytest.raises(Exception) as raised:
        call()
    assert getattr(raised.value, "code", None) == code, raised.value
    return raised.value


def flows_copy(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    shutil.copytree(FLOWS, root / "flows")
    return root


def capture(site, root: Path):
    with open_source(root, work_dir=site.root) as tree:
        return site.pipeline.capture_ordinary(tree)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


# 1. Empty project or ordinary membership rejects.


def test_an_empty_source_delivers_nothing(site, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("no workloads\n")
    with open_source(tmp_path / "empty") as tree:
        assert site.pipeline.compile_native(tree) is None and site.pipeline.capture_ordinary(tree) is None
    release = synthetic_release(site.target)
    refused(
        lambda: compose_release(authority=release.authority, source=release.source, native=None, ordinary=None),
        "release.membership_empty",
    )
    assert site.everything() == []


def test_an_empty_dbt_project_is_refused(site, tmp_path):
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: hollow\nprofile: hollow\n")
    (project / "models" / "schema.yml").write_text("version: 2\n")
    with open_source(project) as tree:
        refused(lambda: compile_native(tree), "release.membership_empty")


def test_an_empty_flows_folder_is_refused(site, tmp_path):
    root = tmp_path / "source"
    (root / "flows").mkdir(parents=True)
    (root / "flows" / "README.md").write_text("nothing scheduled\n")
    refused(lambda: capture(site, root), "flows.empty_membership")


# 2. A native workspace with delivery authority but no execution subject installs; running it rejects before
# credentials.


class Spy:
    def __init__(self) -> None:
        self.calls = []

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.calls.append(name)


def test_native_without_execution_subjects_installs_and_cannot_run(site):
    release = synthetic_release(site.target, workloads=None)
    assert release.bundle.parent.execution_subjects == ()
    site.publish(release)
    site.install(release)
    installed = site.pipeline.cache.load(release.bundle.release_id)
    view = admission_view(
        installed.bundle, authority_expires_at=site.target.clock.now() + timedelta(hours=1), revocation_epoch=0
    )
    spies = {name: Spy() for name in ("init_fetcher", "credentials", "sources", "writers")}
    epochs = type("Epochs", (), {"current_epoch": lambda self: 0})()
    launcher = StandardRuntimeLauncher(clock=site.target.clock, epochs=epochs, **spies)
    for uid in release.bundle.native_membership:
        with pytest.raises(ExecutionDeniedError):
            launcher.launch(view, RuntimeTask(TaskKind.NATIVE, uid))
    assert all(spy.calls == [] for spy in spies.values())


# 3. Duplicate selectors, pack IDs, hook IDs or logical writes reject.


def test_duplicate_selectors_are_refused(site, tmp_path):
    root = flows_copy(tmp_path)
    shutil.copytree(root / "flows" / "orders_snapshot", root / "flows" / "orders_snapshot_copy")
    edit(
        root / "flows" / "orders_snapshot_copy" / "flow.yaml",
        "pack_id: orders_snapshot",
        "pack_id: orders_snapshot_copy",
    )
    refused(lambda: capture(site, root), "flows.duplicate_selector")


def test_duplicate_pack_ids_are_refused(site, tmp_path):
    root = flows_copy(tmp_path)
    shutil.copytree(root / "flows" / "orders_snapshot", root / "flows" / "orders_snapshot_copy")
    refused(lambda: capture(site, root), "flows.duplicate_pack_id")


def test_duplicate_hook_ids_are_refused(site, tmp_path):
    root = flows_copy(tmp_path)
    edit(
        root / "flows" / "orders_snapshot" / "flow.yaml",
        "id: orders_snapshot.clear_today",
        "id: orders_snapshot.ensure_staging",
    )
    refused(lambda: capture(site, root), "flows.duplicate_hook_id")


def test_a_logical_write_claimed_twice_is_refused(site):
    refused(
        lambda: synthetic_release(site.target, workloads={"transfer": (("marts.customers",), ())}),
        "release.logical_write_collision",
    )
    assert site.everything() == []


# 4. Unknown fields, null authority, symlinks, archive traversal and digest drift reject before publication.


def test_a_grant_with_an_unknown_field_is_refused(site):
    grant = site.target.authority.grant(
        native_membership=["model.shop.orders"], ordinary_membership=[], execution_subjects=[]
    )
    value = loads(grant.canonical_bytes())
    value["execute_anyway"] = True
    forged = dumps(value)
    signatures = [signer.sign_bytes(forged) for signer in site.target.authority.signers[:2]]
    source = ReconstructedSource(
        repository=SYNTHETIC_REPOSITORY,
        commit=SYNTHETIC_COMMIT,
        native_membership=["model.shop.orders"],
        ordinary_membership=[],
        source_bytes=1,
        peak_cpu_millicores=0,
        peak_memory_bytes=0,
    )
    refused(
        lambda: verify_grant(
            forged,
            signatures,
            pinned_policy_digest=site.target.authority.policy_digest,
            source=source,
            ports=site.target.authority.ports,
        ),
        "contract.unknown_field",
    )


def test_null_authority_is_refused_at_every_stage(site):
    release = synthetic_release(site.target)
    refused(
        lambda: compose_release(
            authority=None, source=release.source, native=release.native, ordinary=release.ordinary
        ),
        "release.authority_missing",
    )
    refused(lambda: site.pipeline.publish(release.bundle, authority=None, receipt=None), "release.authority_missing")
    refused(
        lambda: site.pipeline.cache.materialize(release.bundle, authority=None, receipt=None),
        "release.authority_missing",
    )
    assert site.everything() == [] and site.pipeline.cache.deployments() == []


def test_a_symlink_in_the_source_is_refused(site, tmp_path):
    root = flows_copy(tmp_path)
    (root / "flows" / "orders_snapshot" / "sql" / "alias.sql").symlink_to("/etc/hostname")
    refused(lambda: open_source(root), "source.symlink_escape")


def tar_with(name: str, *, link: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        if link:
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(info)
        else:
            info.size = 5
            archive.addfile(info, io.BytesIO(b"hello"))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("member", "link", "code"),
    [("../escape.sql", False, "source.path_traversal"), ("flows/x/link.sql", True, "source.link_member")],
)
def test_hostile_archives_are_refused_before_anything_is_written(site, tmp_path, member, link, code):
    archive = tmp_path / "source.tar.gz"
    archive.write_bytes(tar_with(member, link=link))
    work = tmp_path / "work"
    work.mkdir()
    refused(lambda: open_source(archive, work_dir=work), code)
    assert list(work.iterdir()) == [] and site.everything() == []


def test_digest_drift_after_reading_is_refused_before_publication(site, tmp_path):
    root = flows_copy(tmp_path)
    with open_source(root, work_dir=tmp_path) as tree:
        ordinary = site.pipeline.capture_ordinary(tree)
        authority = site.target.verify(
            native=[],
            ordinary=ordinary.pack_ids,
            source_bytes=tree.snapshot.total_bytes,
            execution_subjects=[ExecutionSubject(**s) for s in ordinary.execution_subjects()],
        )
        victim = next(tree.root.rglob("*.sql"))
        victim.write_text(victim.read_text() + "-- drift\n")
        error = refused(
            lambda: compose_release(authority=authority, source=tree, native=None, ordinary=ordinary),
            "release.source_closure_mismatch",
        )
    assert "source.digest_drift" in error.message
    assert site.everything() == []


# 5. Remote publication and cache materialization reject direct and composed releases without the exact receipt
# and budget.


def test_publication_without_the_exact_receipt_is_refused(site):
    release = synthetic_release(site.target)
    other = synthetic_release(site.target, workloads=None, sequence=2)
    refused(lambda: site.publish(release, receipt=None), "admission.receipt_missing")
    refused(
        lambda: site.publish(release, receipt=site.target.materialization(release.bundle, release.authority)),
        "admission.receipt_kind_mismatch",
    )
    refused(
        lambda: site.publish(release, receipt=site.target.publication(other.bundle, other.authority)),
        "admission.binding_mismatch",
    )
    assert site.everything() == []


def test_publication_and_materialization_reapply_the_combined_budget(site):
    release = synthetic_release(site.target)
    receipt = site.target.publication(release.bundle, release.authority)
    tight = release.authority.model_copy(
        update={"effective_limits": release.authority.effective_limits.model_copy(update={"max_workloads": 1})}
    )
    refused(lambda: site.pipeline.publish(release.bundle, authority=tight, receipt=receipt), "release.budget_exceeded")
    assert site.everything() == []
    site.publish(release)
    refused(
        lambda: site.pipeline.cache.materialize(
            release.bundle, authority=tight, receipt=site.target.materialization(release.bundle, release.authority)
        ),
        "release.budget_exceeded",
    )
    assert site.pipeline.cache.deployments() == []


def test_a_direct_native_release_without_a_parent_is_refused(site):
    release = synthetic_release(site.target)
    native_document = next(
        data for path, data in release.bundle.members.items() if path.startswith("native/") and path.count("/") == 1
    )
    direct = release.bundle.__class__(**{**release.bundle.__dict__, "members": {PARENT_PATH: native_document}})
    refused(
        lambda: site.pipeline.registry.publish(
            direct, authority=release.authority, receipt=None, admission=site.target.issuer
        ),
        "release.not_development_family",
    )
    refused(
        lambda: site.pipeline.cache.materialize(direct, authority=release.authority, receipt=None),
        "release.not_development_family",
    )
    assert site.everything() == [] and site.pipeline.cache.deployments() == []


# 6. Public delivery CLI commands cannot turn embedded release metadata into development authority.


def test_the_cli_offers_no_delivery_command_and_inspection_writes_nothing(site):
    release = synthetic_release(site.target)
    site.publish(release)
    site.install(release)
    commands = {
        command.name
        for group in dpone_app.registered_groups
        if group.name == "release"
        for command in group.typer_instance.registered_commands
    }
    # inspection, plus the operator operations, which read authority only from the configured
    # platform (no path, file or flag names authority); nothing publishes, installs or activates
    assert commands == {"show", "verify", "recover", "repair-audit", "rollback", "gc", "break-lease"}
    operations = {
        c.name: c
        for g in dpone_app.registered_groups
        if g.name == "release"
        for c in g.typer_instance.registered_commands
        if c.name not in {"show", "verify"}
    }
    # break-lease names the lease it breaks (an id the registry lists) and may force an expired one;
    # neither names authority. Every other operation takes nothing but --dry-run and --json.
    expected = {name: {"dry_run", "as_json"} for name in operations} | {
        "break-lease": {"lease_id", "dry_run", "force", "as_json"}
    }
    assert {name: set(inspect.signature(c.callback).parameters) for name, c in operations.items()} == expected
    deployment = site.pipeline.cache.root / "deployments" / release.bundle.release_id[7:]
    before = {p: p.read_bytes() for p in site.root.rglob("*") if p.is_file()}
    for args in (["release", "verify", str(deployment)], ["release", "show", "--json", str(deployment)]):
        result = CliRunner().invoke(dpone_app, args)
        assert result.exit_code == 0, result.output
    assert {p: p.read_bytes() for p in site.root.rglob("*") if p.is_file()} == before


# 7. A connection projection containing credential material rejects.


def test_credential_material_in_a_connection_is_refused(site, tmp_path):
    root = flows_copy(tmp_path)
    edit(
        root / "flows" / "orders_snapshot" / "flow.yaml",
        "parameters: {schema: raw}",
        "parameters: {schema: raw, password: hunter2}",
    )
    error = refused(lambda: capture(site, root), "flows.connection_credential")
    assert "hunter2" not in str(error)


# 8. Resource request greater than limit or outside policy rejects.


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ('requests: {cpu: "250m"', 'requests: {cpu: "2"', "flows.resource_request_above_limit"),
        ('limits: {cpu: "1"', 'limits: {cpu: "64"', "flows.resource_outside_policy"),
    ],
)
def test_resources_above_their_limit_or_the_policy_are_refused(site, tmp_path, old, new, code):
    root = flows_copy(tmp_path)
    edit(root / "flows" / "orders_snapshot" / "flow.yaml", old, new)
    refused(lambda: capture(site, root), code)


# 9. Pre-hook tasks keep publish_xcom=false, and the development family cannot start them.


def test_pre_hooks_keep_publish_xcom_false_and_cannot_start(site):
    release = synthetic_release(site.target)
    site.publish(release)
    site.install(release)
    hooks = [hook for workload in release.bundle.ordinary for hook in workload.hooks]
    assert hooks and all(hook.publish_xcom is False for hook in hooks)
    for workload in release.bundle.ordinary:
        for hook in workload.hooks:
            denial = site.pipeline.admit(
                release.bundle.release_id, RuntimeTask(TaskKind.PRE_HOOK, workload.pack_id, hook.hook_id)
            )
            assert denial.reason.value == "admission.development_dormant"


# 10. Partial publication reports durability uncertainty and never success.


def test_partial_publication_is_uncertain_never_success(site):
    release = synthetic_release(site.target)
    real = site.store.put_if_absent
    calls = []

    def flaky(key, data):
        if key.startswith("leases/"):  # the publication lease is not one of the publication's own writes
            return real(key, data)
        calls.append(key)
        if len(calls) == 3:
            raise OSError("injected")
        return real(key, data)

    site.store.put_if_absent = flaky
    error = refused(lambda: site.publish(release), "release.durability_uncertain")
    assert len(error.written) == 2 and error.pending
    assert site.releases_area() == []
    site.store.put_if_absent = real
    assert site.publish(release).release_id == release.bundle.release_id


# 11. Expiry or revocation blocks new attempts; historical evidence stays readable.


def test_expiry_blocks_new_attempts_and_history_stays_readable(site):
    release = synthetic_release(site.target)
    site.publish(release)
    site.install(release)
    site.target.clock.moment += timedelta(days=3)
    refused(lambda: site.target.publication(release.bundle, release.authority), "admission.expired")
    with pytest.raises(AdmissionError):
        site.target.issuer.require_current(
            None,
            PublicationReceipt,
            release_id=release.bundle.release_id,
            deployment_id="x",
            authority=release.authority,
        )
    assert site.pipeline.registry.fetch(release.bundle.release_id).release_id == release.bundle.release_id
    assert site.pipeline.cache.audit_log()[0].release_id == release.bundle.release_id
    result = CliRunner().invoke(
        dpone_app,
        ["release", "show", "--json", str(site.pipeline.cache.root / "deployments" / release.bundle.release_id[7:])],
    )
    assert result.exit_code == 0 and '"authority_expired": true' in result.output


def test_the_pipeline_reconstructs_the_source_it_is_given(site):
    release = synthetic_release(site.target)
    reconstructed = site.pipeline.reconstruct(
        SourceIdentity(SYNTHETIC_REPOSITORY, SYNTHETIC_COMMIT), release.native, release.ordinary
    )
    assert reconstructed.native_membership == release.native.membership
    assert reconstructed.ordinary_membership == tuple(sorted(release.ordinary.pack_ids))
    assert reconstructed.source_bytes == release.bundle.source_bytes
