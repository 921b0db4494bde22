"""SYNTHETIC ONLY: one organization-neutral example of every dispatchable document type.

Built from the synthetic authority (`synthetic.py`), so every example is internally consistent: the
grant is validly signed, receipts come from a real `ReceiptIssuer`, the parent's integrity subject
matches. Golden vectors, the schema reference and the bench all use these documents. The one thing a
reader could get wrong: the output is deterministic (fixed keys, fixed clock) on purpose; the golden
vectors depend on it, so do not introduce randomness or the wall clock here.
"""

from __future__ import annotations

import hashlib

from dpone_dagster.authority.memory import ControllableCurrentTarget
from dpone_dagster.authority.synthetic import SYNTHETIC_COMMIT, SyntheticAuthority, synthetic_source
from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.policy import repository_digest
from dpone_dagster.contracts.release_documents import (
    DbtChecksum,
    DbtDevelopmentReleaseSet,
    DbtNode,
    DbtProjectRelease,
    DevelopmentReleaseSetV3,
    NativeConstituent,
    OrdinaryConstituent,
    ProductionCompositionV3,
    ProductionReleaseSetV1,
    ProductionReleaseSetV2,
    RouteCertification,
    SourceSidecar,
    SyntheticCompositionV3,
    integrity_subject_for,
)
from dpone_dagster.contracts.release_pages import (
    DevelopmentReleasePage,
    PagedDevelopmentReleaseSetV3,
    paged_integrity_subject_for,
)
from dpone_dagster.contracts.target import DeploymentProjection, TargetConfiguration


def _hex(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def _digest(label: str) -> str:
    return digest("dpone.example.v1", {"label": label})


def synthetic_documents() -> dict[str, ContractModel]:
    """One example per dispatchable document type, keyed by `schema` or `schema.profile`."""
    authority = SyntheticAuthority()
    grant = authority.grant()
    grant_bytes, signatures = authority.signed(grant)
    verified = verify_grant(
        grant_bytes,
        signatures,
        pinned_policy_digest=authority.policy_digest,
        source=synthetic_source(),
        ports=authority.ports,
    )

    binding = dict(
        authority_family="development",
        purpose="development_delivery",
        trust_tier="non_production",
        policy_digest=authority.policy_digest,
        grant_digest=verified.grant_digest,
        source_repository_digest=repository_digest(authority.policy.source_repository),
        source_commit=SYNTHETIC_COMMIT,
        source_snapshot_digest=_digest("snapshot"),
        delivery_status="delivered_dormant",
    )
    native = DbtDevelopmentReleaseSet(
        **binding,
        projects=[
            DbtProjectRelease(
                project_name="synthetic_shop",
                selection_fingerprint=_digest("selection"),
                nodes=[
                    DbtNode(unique_id=uid, checksum=DbtChecksum(name="sha256", checksum=_hex(uid)))
                    for uid in grant.native_membership
                ],
                route_certifications=[],
            )
        ],
    )
    native_constituents = [
        NativeConstituent(
            constituent_id=native.document_digest(),
            artifact_wire="dpone.dbt-airflow-self-service.v2",
            project_names=["synthetic_shop"],
        )
    ]
    ordinary_constituents = [
        OrdinaryConstituent(
            constituent_id=_digest("captured-workload"),
            pack_id="synthetic_transfer",
            selector="flow:synthetic_transfer",
            dag_id="synthetic_transfer",
            fingerprint=_digest("pack-fingerprint"),
            dag_content_sha256=_hex("dag.yaml"),
            hook_ids=["create_staging"],
        )
    ]
    sidecars = sorted(
        [
            SourceSidecar(
                constituent_id=native.document_digest(),
                path="dbt/models/orders.sql",
                content_sha256=_hex("orders"),
                size=412,
            ),
            SourceSidecar(
                constituent_id=_digest("captured-workload"),
                path="flows/synthetic_transfer/flow.yaml",
                content_sha256=_hex("flow"),
                size=733,
            ),
        ],
        key=SourceSidecar.sort_key,
    )
    parent = DevelopmentReleaseSetV3(
        **binding,
        native_constituents=native_constituents,
        ordinary_constituents=ordinary_constituents,
        source_sidecars=sidecars,
        integrity_subject=integrity_subject_for(native_constituents, ordinary_constituents, sidecars),
        execution_subjects=grant.execution_subjects,
        route_certifications=[],
    )
    page = DevelopmentReleasePage(ordinary_constituents=ordinary_constituents, source_sidecars=sidecars)
    paged = PagedDevelopmentReleaseSetV3(
        **binding,
        native_constituents=native_constituents,
        pages=[page.document_digest()],
        integrity_subject=paged_integrity_subject_for(native_constituents, [page.document_digest()]),
        execution_subjects=grant.execution_subjects,
        route_certifications=[],
    )

    issuer = ReceiptIssuer(
        TargetConfiguration(
            environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
        ),
        ControllableCurrentTarget(authority.policy_digest),
        authority.clock,
    )
    projection = DeploymentProjection(
        release_id=parent.document_digest(),
        deployment_id="synthetic-deployment-0001",
        environment="synthetic-dev",
        trust_tier="non_production",
        grant_digest=verified.grant_digest,
    )
    certification = RouteCertification(
        route_id="synthetic_route", evidence_digest=_digest("evidence"), certified_at="2026-01-01T00:00:00Z"
    )
    production = dict(
        purpose="production_release",
        trust_tier="production",
        release_name="synthetic-release",
        source_commit=SYNTHETIC_COMMIT,
    )
    return {
        "dpone.release-set.v1": ProductionReleaseSetV1(
            **production, constituents=[_digest("c1")], route_certifications=[certification]
        ),
        "dpone.release-set.v2": ProductionReleaseSetV2(
            **production,
            source_repository_digest=binding["source_repository_digest"],
            constituents=[_digest("c1")],
            route_certifications=[certification],
        ),
        **{
            f"dpone.release-set.v3.{profile}": ProductionCompositionV3(
                **production,
                profile=profile,
                source_repository_digest=binding["source_repository_digest"],
                native_constituent=_digest("native"),
                plain_transfer_constituents=[_digest("transfer")],
                route_certifications=[certification],
            )
            for profile in ("production_workspace_composition_v1", "production_plain_transfer_composition_v1")
        },
        "dpone.release-set.v3.synthetic_composition_validation": SyntheticCompositionV3(
            purpose="synthetic_validation",
            trust_tier="non_production",
            data_class="synthetic",
            campaign_id="synthetic-campaign",
            constituents=[_digest("c1")],
        ),
        "dpone.release-set.v3.development_workspace_delivery_v1": parent,
        "dpone.release-set.v3.development_workspace_delivery_paged_v1": paged,
        "dpone.release-page.v1": page,
        "dpone.dbt-release-set.development.v1": native,
        "dpone.development-policy.v1": authority.policy,
        "dpone.development-authority.v1": grant,
        "dpone.development-authority-signatures.v1": signatures,
        "dpone.development-authority-receipt.v1": verified,
        "dpone.publication-receipt.v1": issuer.issue_publication(verified, projection),
        "dpone.materialization-receipt.v1": issuer.issue_materialization(verified, projection),
        "dpone.activation-receipt.v1": issuer.issue_activation(verified, projection, purpose="pointer_recovery"),
        "dpone.cleanup-receipt.v1": issuer.issue_cleanup(),
    }
