"""The development delivery pipeline, stage by stage, over injected ports.

The demo and the Dagster assets call one method per stage, in this order:

    native    = pipeline.compile_native(tree)                     # sealed dbt compile (or None)
    ordinary  = pipeline.capture_ordinary(tree)                   # flow capture (or None)
    authority = pipeline.verify_authority(grant, signatures,      # k-of-n grant -> authority receipt
                    pipeline.reconstruct(identity, tree, native, ordinary))
    bundle    = pipeline.compose(authority=..., source=tree, native=..., ordinary=...)   # Checked, then Composed
    receipt   = issuer.issue_publication(authority, pipeline.projection(bundle, authority))
    pipeline.publish(bundle, authority=..., receipt=...)          # Published
    pipeline.install(bundle.release_id, authority=..., materialization=..., activation=...)  # Installed
    pipeline.admit(bundle.release_id, task)                       # Denied, always, before any credential

When the source was an archive, the Composed state records its SHA-256 (`source_archive_sha256`);
the release documents name the source by its snapshot digest, which is the same for a checkout and
any archive of it.

Receipts are issued by the platform adapter (`ReceiptIssuer`) outside this service and passed in:
nothing here turns release metadata into authority. Every stage records its outcome in the release
state machine when one is injected.

What a reader could get wrong: `publish` and `install` re-verify everything themselves (bundle
integrity, combined budget, the live receipt); passing a bundle that `compose` returned earlier is
not trusted as proof of anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.authority.ports import AuthorityPorts
from dpone_dagster.authority.verification import ReconstructedSource, verify_grant, verify_policy
from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import MAX_SAFE_INTEGER, MAX_WORKLOADS, parse_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.flows import OrdinaryCapture
from dpone_dagster.contracts.grant import DetachedSignature, GrantSignatures
from dpone_dagster.contracts.policy import DeliveryLimits
from dpone_dagster.contracts.receipts import (
    ActivationReceipt,
    DevelopmentAuthorityReceipt,
    MaterializationReceipt,
    PublicationReceipt,
)
from dpone_dagster.contracts.target import DeploymentProjection
from dpone_dagster.release.build.budget import flow_directories, require_parent_can_fit
from dpone_dagster.release.build.bundle import ReleaseBundle, deployment_projection
from dpone_dagster.release.build.compose import check_composition, compose_checked
from dpone_dagster.release.build.flows import capture_ordinary
from dpone_dagster.release.build.native import CompilableSource, NativeCompilation, compile_native, discover_projects
from dpone_dagster.release.delivery.install import ActivationResult, ReleaseCache
from dpone_dagster.release.delivery.registry import PublicationResult, ReleaseRegistry
from dpone_dagster.release.errors import DurabilityUncertainError
from dpone_dagster.release.ports import TargetAdmission
from dpone_dagster.release.runtime.admission import AdmissionDenial, RuntimeTask, admission_view, admit
from dpone_dagster.release.state import ReleaseState, ReleaseStateMachine


@dataclass(frozen=True)
class SourceIdentity:
    """The repository and exact commit the platform checked out, independently of the release."""

    repository: str
    commit: str


def workload_limits(source: ReconstructedSource) -> DeliveryLimits:
    """The workload term of "effective limits = min(policy, grant, workload)": what the workloads hold.

    Workload count and source bytes of the reconstructed source, and its peak per-workload CPU and
    memory (no bound from a term with no ordinary workload). Applied again at compose, publish and
    install, so a delivery can never grow past what was verified.
    """
    workloads = len(source.native_membership) + len(source.ordinary_membership)
    return DeliveryLimits(
        max_workloads=min(MAX_WORKLOADS, max(1, workloads)),
        max_source_bytes=max(1, source.source_bytes),
        max_cpu_millicores=source.peak_cpu_millicores or MAX_SAFE_INTEGER,
        max_memory_bytes=source.peak_memory_bytes or MAX_SAFE_INTEGER,
    )


@dataclass
class ReleasePipeline:
    """One service, injected ports, one method per stage."""

    authority_ports: AuthorityPorts
    pinned_policy_digest: str
    registry: ReleaseRegistry
    cache: ReleaseCache
    admission: TargetAdmission
    clock: Clock
    states: ReleaseStateMachine | None = None
    work_dir: Path | None = None

    # -- stage 1: compile and capture -------------------------------------------------------

    def compile_native(self, source: CompilableSource) -> NativeCompilation | None:
        """Compile every publishing dbt project of the source; None when it holds none.

        First refuses a source whose flows cannot fit one parent (`require_parent_can_fit`)."""
        require_parent_can_fit(ordinary_workloads=flow_directories(item.path for item in source.snapshot.files))
        if not discover_projects(Path(source.root)):
            return None
        return compile_native(source, work_dir=self.work_dir)

    def capture_ordinary(self, source: CompilableSource) -> OrdinaryCapture | None:
        """Capture and rebuild every ordinary flow workload; None when the source has no `flows/`."""
        if not source.snapshot.under("flows"):
            return None
        require_parent_can_fit(ordinary_workloads=flow_directories(item.path for item in source.snapshot.files))
        policy = verify_policy(
            self.authority_ports.policies.policy_bytes(self.pinned_policy_digest), self.pinned_policy_digest
        )
        return capture_ordinary(source, resource_ceiling=policy.limits)

    def reconstruct(
        self, identity: SourceIdentity, native: NativeCompilation | None, ordinary: OrdinaryCapture | None
    ) -> ReconstructedSource:
        """What the grant is checked against: exact commit, membership, bytes and peak resources."""
        workloads = ordinary.workloads if ordinary is not None else ()
        quantities = [q for w in workloads for q in (w.resources.requests, w.resources.limits)]
        return ReconstructedSource(
            repository=identity.repository,
            commit=identity.commit,
            native_membership=list(native.membership) if native else [],
            ordinary_membership=sorted(w.pack_id for w in workloads),
            source_bytes=(native.source_bytes if native else 0)
            + sum(f.size for w in workloads for f in w.source_files),
            peak_cpu_millicores=max((q.cpu_millicores for q in quantities), default=0),
            peak_memory_bytes=max((q.memory_bytes for q in quantities), default=0),
        )

    def verify_authority(
        self,
        grant_bytes: bytes,
        signatures: GrantSignatures | Sequence[DetachedSignature],
        source: ReconstructedSource,
    ) -> DevelopmentAuthorityReceipt:
        """The authority receipt; its effective limits are min(policy, grant, `workload_limits(source)`)."""
        return verify_grant(
            grant_bytes,
            signatures,
            pinned_policy_digest=self.pinned_policy_digest,
            source=source,
            ports=self.authority_ports,
            declared_limits=workload_limits(source),
        )

    # -- stage 2: compose -------------------------------------------------------------------

    def compose(
        self,
        *,
        authority: DevelopmentAuthorityReceipt,
        source,
        native: NativeCompilation | None,
        ordinary: OrdinaryCapture | None,
    ) -> ReleaseBundle:
        """Checked once every composition check passed (the identity is then known), Composed once the
        reacquired source bytes are staged, reread and verified; a failure in between is noted as a
        refused Composed attempt and leaves the release Checked."""
        checked = check_composition(authority=authority, native=native, ordinary=ordinary)
        counts = {
            "native": len(native.membership) if native else 0,
            "ordinary": len(ordinary.workloads) if ordinary else 0,
        }
        self._advance(checked.release_id, ReleaseState.CHECKED, **counts)
        with self._recorded(checked.release_id, ReleaseState.COMPOSED):
            bundle = compose_checked(checked, source=source, stage_dir=self.work_dir)
        archive_sha256 = getattr(source, "archive_sha256", None)
        recorded = {"source_archive_sha256": archive_sha256} if archive_sha256 else {}
        self._advance(bundle.release_id, ReleaseState.COMPOSED, source_bytes=bundle.source_bytes, **recorded)
        return bundle

    def projection(self, bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt) -> DeploymentProjection:
        """The integrity-checked deployment projection receipts are issued against."""
        return deployment_projection(bundle, authority)

    # -- stage 3: publish -------------------------------------------------------------------

    def publish(
        self, bundle: ReleaseBundle, *, authority: DevelopmentAuthorityReceipt, receipt: PublicationReceipt | None
    ) -> PublicationResult:
        with self._recorded(bundle.release_id, ReleaseState.PUBLISHED):
            result = self.registry.publish(bundle, authority=authority, receipt=receipt, admission=self.admission)
        self._advance(bundle.release_id, ReleaseState.PUBLISHED, bytes_written=result.bytes_written)
        return result

    # -- stage 4: install -------------------------------------------------------------------

    def install(
        self,
        release_id: str,
        *,
        authority: DevelopmentAuthorityReceipt,
        materialization: MaterializationReceipt | None,
        activation: ActivationReceipt | None,
    ) -> ActivationResult:
        """Fetch from the registry, install into the cache, activate. Identical retries change nothing."""
        with self._recorded(release_id, ReleaseState.INSTALLED):
            with self.registry.leases.hold(
                "materialization", subject=release_id
            ):  # cleanup never removes staging under us
                bundle = self.registry.fetch(release_id)
                installed = self.cache.materialize(bundle, authority=authority, receipt=materialization)
            pointer = self.cache.current()
            if pointer is not None and pointer.release_id == release_id and self.cache.pending() is None:
                result = ActivationResult(
                    release_id,
                    installed.deployment_id,
                    pointer.previous_release_id,
                    pointer.audit_sequence,
                    changed=False,
                )
            else:
                result = self.cache.activate(release_id, receipt=activation)
        self._advance(
            release_id, ReleaseState.INSTALLED, activated=result.changed, bytes_written=installed.bytes_written
        )
        return result

    # -- stage 5: runtime admission ---------------------------------------------------------

    def admit(self, release_id: str, task: RuntimeTask) -> AdmissionDenial:
        """Standard-runtime admission of one task of an installed release: always a typed denial."""
        installed = self.cache.load(release_id)
        view = admission_view(
            installed.bundle,
            authority_expires_at=parse_timestamp(installed.record.authority_expires_at),
            revocation_epoch=installed.record.revocation_epoch,
        )
        epoch = self.authority_ports.epochs.current_epoch(
            installed.bundle.parent.policy_digest, installed.record.environment
        )
        denial = admit(view, task, now=self.clock.now(), current_revocation_epoch=epoch)
        self._advance(release_id, ReleaseState.DENIED, reason=denial.reason.value, task=task.kind.value)
        return denial

    # -- state recording --------------------------------------------------------------------

    def _advance(self, release_id: str, state: ReleaseState, **detail: str | int | bool) -> None:
        if self.states is not None:
            self.states.advance(release_id, state, **detail)

    def _recorded(self, release_id: str, attempted: ReleaseState):
        return _AttemptRecorder(self.states, release_id, attempted)


class _AttemptRecorder:
    """Records a failed attempt (`uncertain` or `refused`, with its code) without changing state."""

    def __init__(self, states: ReleaseStateMachine | None, release_id: str, attempted: ReleaseState) -> None:
        self.states, self.release_id, self.attempted = states, release_id, attempted

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, _traceback) -> bool:
        if self.states is not None and isinstance(error, CodedError):
            outcome = "uncertain" if isinstance(error, DurabilityUncertainError) else "refused"
            self.states.note(self.release_id, self.attempted, outcome, code=error.code)
        return False
