"""The release group's side of the rollout gate and of the synthetic runtime (thin: services do the work).

- `evaluate_gate(resources, pipeline, bundle, authority, ...)`: the rollout gate (`dpone_dagster.release.runtime.gate`)
  over every task of `bundle`, with the authority's expiry and epoch, denials persisted through
  `ReleaseDenials`, and the acceptance report written under the settings' acceptance directory.
- `install_stage_gate(...)`: what `installed_release` calls *before* it installs or activates: the
  gate again, refusing with `release.rollout_blocked` if it does not pass (so selecting the install
  stage alone cannot skip it), and the metadata that links the acceptance report.
- `install_synthetic_runtime(...)`: embedded default only, after activation: the executable
  synthetic-family release of the platform's pinned synthetic campaign (never of the development
  release), installed into the synthetic runtime.

What a reader could get wrong: the blocking check `rollout_gate` on `published_release` evaluates the
release bytes fetched back from the registry, exactly what installation will fetch; the install
stage's own evaluation is a second, independent barrier, not a replacement.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from dpone_dagster.contracts.bounds import parse_timestamp
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt
from dpone_dagster.release.build.bundle import ReleaseBundle
from dpone_dagster.release.delivery.deployments import InstalledRelease
from dpone_dagster.release.pipeline import ReleasePipeline
from dpone_dagster.release.runtime.admission import admission_view
from dpone_dagster.release.runtime.catalog import dormant_tasks
from dpone_dagster.release.runtime.gate import (
    AcceptanceReport,
    GateResult,
    RolloutBlockedError,
    evaluate_rollout_gate,
    write_acceptance_report,
)
from dpone_dagster.release.runtime.synthetic_campaign import install_synthetic_campaign
from dpone_dagster.release.services import location_label
from dpone_dagster.release.state import ReleaseDenials


@dataclass(frozen=True)
class EvaluatedGate:
    result: GateResult
    report: AcceptanceReport

    def report_metadata(self) -> dict[str, dg.RawMetadataValue]:
        return {
            "acceptance_report": dg.MetadataValue.path(location_label(self.report.markdown_path)),
            "acceptance_report_json": dg.MetadataValue.path(location_label(self.report.json_path)),
            "acceptance_report_sha256": self.report.json_sha256,
            "rollout_gate": "passed" if self.result.passed else "blocked",
        }


def evaluate_gate(
    resources,
    pipeline: ReleasePipeline,
    bundle: ReleaseBundle,
    authority: DevelopmentAuthorityReceipt,
    *,
    run_id: str,
    origin: str,
) -> EvaluatedGate:
    platform = resources.authority_platform
    view = admission_view(
        bundle, authority_expires_at=parse_timestamp(authority.expires_at), revocation_epoch=authority.revocation_epoch
    )
    recorder = ReleaseDenials(pipeline.states, run_id=run_id, origin=origin) if pipeline.states is not None else None
    result = evaluate_rollout_gate(
        view,
        dormant_tasks(bundle),
        clock=pipeline.clock,
        epochs=platform.protected,
        target=platform.protected,
        recorder=recorder,
        identity={
            "environment": authority.environment,
            "policy_digest": bundle.parent.policy_digest,
            "grant_digest": bundle.parent.grant_digest,
            "source_commit": bundle.parent.source_commit,
            "delivery_status": bundle.parent.delivery_status,
        },
    )
    return EvaluatedGate(result, write_acceptance_report(result, platform.settings.acceptance_dir))


def install_stage_gate(
    resources, pipeline: ReleasePipeline, bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt, *, run_id: str
) -> EvaluatedGate:
    gate = evaluate_gate(resources, pipeline, bundle, authority, run_id=run_id, origin="install_stage")
    if not gate.result.passed:
        raise RolloutBlockedError(
            "release.rollout_blocked", f"{gate.result.summary()}; nothing was installed or activated"
        )
    return gate


def active_gate(
    resources, pipeline: ReleasePipeline, *, run_id: str
) -> tuple[InstalledRelease | None, GateResult | None]:
    """The gate over the *active* installed release (after activation); its denials move it to Denied."""
    pointer = pipeline.cache.current()
    if pointer is None:
        return None, None
    installed = pipeline.cache.load(pointer.release_id)
    platform = resources.authority_platform
    view = admission_view(
        installed.bundle,
        authority_expires_at=parse_timestamp(installed.record.authority_expires_at),
        revocation_epoch=installed.record.revocation_epoch,
    )
    recorder = (
        ReleaseDenials(pipeline.states, run_id=run_id, origin="dormancy_check") if pipeline.states is not None else None
    )
    result = evaluate_rollout_gate(
        view,
        dormant_tasks(installed.bundle),
        clock=pipeline.clock,
        epochs=platform.protected,
        target=platform.protected,
        recorder=recorder,
    )
    return installed, result


def install_synthetic_runtime(resources) -> dict[str, dg.RawMetadataValue]:
    """Embedded default only: install the platform's pinned synthetic campaign (never the development release)."""
    platform = resources.authority_platform
    root = platform.settings.synthetic_runtime_root
    if root is None or not platform.settings.runs_synthetic_runtime or not platform.protected.synthetic_target():
        return {"synthetic_runtime_release": "(none: configured platform)"}
    installed = install_synthetic_campaign(root)
    return {
        "synthetic_runtime_release": installed.release_id,
        "synthetic_runtime_written": installed.written,
        "synthetic_runtime_workloads": installed.workloads,
    }
