"""Release documents of the three closed families: development, production and synthetic.

Development family (delivery only, never execution):

- `DbtDevelopmentReleaseSet` (`dpone.dbt-release-set.development.v1`, artifact wire
  `dpone.dbt-airflow-self-service.v2`): one native dbt workspace. Fill it from a compiled manifest:
  per project `project_name`, `selection_fingerprint` (digest of the exact selection in the domain
  `SELECTION_KIND`), and per selected node its manifest `unique_id` and `checksum` (`{"name":
  "sha256", "checksum": <hex>}` as dbt writes it); plus `source_snapshot_digest` of the exact source
  tree and the grant's `policy_digest` / `grant_digest`. `route_certifications` must be empty.
- `DevelopmentReleaseSetV3` (`dpone.release-set.v3`, profile `development_workspace_delivery_v1`):
  the parent. `native_constituents` carry the digest of each development dbt release set;
  `ordinary_constituents` carry per rebuilt flow pack its `pack_id`, `selector`, `dag_id`,
  `fingerprint` (the pack fingerprint), `dag_content_sha256` (plain SHA-256 of the original DAG
  bytes), `hook_ids` (dependency order) and a `constituent_id` (`ordinary_constituent_id`: the
  captured workload's digest in the domain `ORDINARY_CONSTITUENT_KIND`); `source_sidecars` list
  every exact source file (constituent, path, content SHA-256, size). `integrity_subject` must equal
  `integrity_subject_for(...)` over constituents and sidecars.

Both carry `authority_family="development"`, `purpose`, `trust_tier="non_production"` and
`delivery_status="delivered_dormant"`: the literal admits no other value, so no development document
can ever claim a workload executed or passed. Production (`dpone.release-set.v1`/`v2`, and `v3` with
the production composition profiles) and synthetic (`v3` with `synthetic_composition_validation`)
documents are minimal closed models that exist so dispatch is closed over all three families.

The one thing a reader could get wrong: `dpone.release-set.v3` is one schema with several profiles.
The identity domain of a v3 document includes its profile (`identity_kind()`), so a development
parent and a production composition with equal bytes-apart-from-profile can never share a digest.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import (
    MAX_LIST,
    MAX_WORKLOADS,
    ContentSha256,
    Count,
    Digest,
    GitCommit,
    Identifier,
    LogicalPath,
    Name,
    Timestamp,
    WorkloadId,
    bounded_text,
    sorted_unique,
)
from dpone_dagster.contracts.flows import CapturedWorkload, FlowSelector, PackId
from dpone_dagster.contracts.grant import ExecutionSubject
from dpone_dagster.contracts.identity import digest

ARTIFACT_WIRE = "dpone.dbt-airflow-self-service.v2"
DBT_DEVELOPMENT_SCHEMA = "dpone.dbt-release-set.development.v1"
RELEASE_SET_V1_SCHEMA = "dpone.release-set.v1"
RELEASE_SET_V2_SCHEMA = "dpone.release-set.v2"
RELEASE_SET_V3_SCHEMA = "dpone.release-set.v3"
DEVELOPMENT_PROFILE = "development_workspace_delivery_v1"
SYNTHETIC_PROFILE = "synthetic_composition_validation"
PRODUCTION_PROFILES = ("production_workspace_composition_v1", "production_plain_transfer_composition_v1")
INTEGRITY_SUBJECT_KIND = "dpone.release-integrity-subject.v1"
ORDINARY_CONSTITUENT_KIND = "dpone.ordinary-constituent.v1"
SELECTION_KIND = "dpone.dbt-selection.v1"

DbtProjectName = bounded_text(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", 128)
DbtChecksumText = bounded_text(r"^[^\x00-\x1f]*$", 400)
NoRouteCertifications = Annotated[tuple[Any, ...], Field(max_length=0)]
DeliveryStatus = Literal["delivered_dormant"]


class _ProfiledIdentity:
    """Mixin for `dpone.release-set.v3` documents: the identity domain is refined by the profile."""

    def identity_kind(self) -> str:
        return f"{type(self).KIND}.{getattr(self, 'profile')}"


class _DevelopmentBinding(ContractModel):
    """What every development release document binds: family, tier, authority and exact source."""

    authority_family: Literal["development"]
    purpose: Literal["development_delivery"]
    trust_tier: Literal["non_production"]
    policy_digest: Digest
    grant_digest: Digest
    source_repository_digest: Digest
    source_commit: GitCommit
    source_snapshot_digest: Digest
    delivery_status: DeliveryStatus


class RouteCertification(ContractModel):
    route_id: Identifier
    evidence_digest: Digest
    certified_at: Timestamp


class _ProductionRelease(ContractModel):
    """What every production release document carries: certified routes for an exact commit."""

    purpose: Literal["production_release"]
    trust_tier: Literal["production"]
    release_name: Name
    source_commit: GitCommit
    route_certifications: sorted_unique(
        RouteCertification, min_length=1, max_length=1024, key=lambda item: item.route_id
    )


# ---------------------------------------------------------------------------------------------
# Development family


class DbtChecksum(ContractModel):
    """A node checksum exactly as dbt's manifest records it."""

    name: Literal["sha256", "path", "none"]
    checksum: DbtChecksumText


class DbtNode(ContractModel):
    unique_id: WorkloadId
    checksum: DbtChecksum


class DbtProjectRelease(ContractModel):
    """One publishing dbt project: its selected nodes and the fingerprint of that selection."""

    project_name: DbtProjectName
    selection_fingerprint: Digest
    nodes: sorted_unique(DbtNode, min_length=1, max_length=MAX_WORKLOADS, key=lambda node: node.unique_id)
    route_certifications: NoRouteCertifications


class DbtDevelopmentReleaseSet(_DevelopmentBinding):
    """A complete native dbt workspace delivered under development authority (dormant)."""

    KIND = DBT_DEVELOPMENT_SCHEMA

    schema_: Literal["dpone.dbt-release-set.development.v1"] = Field(default=DBT_DEVELOPMENT_SCHEMA, alias="schema")
    artifact_wire: Literal["dpone.dbt-airflow-self-service.v2"] = ARTIFACT_WIRE
    projects: sorted_unique(DbtProjectRelease, min_length=1, max_length=256, key=lambda project: project.project_name)

    @model_validator(mode="after")
    def _nodes_unique_across_projects(self) -> DbtDevelopmentReleaseSet:
        ids = [node.unique_id for project in self.projects for node in project.nodes]
        if len(ids) != len(set(ids)):
            raise ValueError("a node unique_id appears in two projects")
        if len(ids) > MAX_WORKLOADS:
            raise ValueError(f"a development release set holds at most {MAX_WORKLOADS} nodes")
        return self

    @property
    def native_membership(self) -> tuple[str, ...]:
        return tuple(sorted(node.unique_id for project in self.projects for node in project.nodes))


class NativeConstituent(ContractModel):
    constituent_id: Digest
    artifact_wire: Literal["dpone.dbt-airflow-self-service.v2"]
    project_names: sorted_unique(DbtProjectName, min_length=1, max_length=256)


class OrdinaryConstituent(ContractModel):
    constituent_id: Digest
    pack_id: PackId
    selector: FlowSelector
    dag_id: PackId
    fingerprint: Digest
    dag_content_sha256: ContentSha256
    hook_ids: tuple[Name, ...] = Field(max_length=32)

    @model_validator(mode="after")
    def _hook_ids_unique(self) -> OrdinaryConstituent:
        if len(set(self.hook_ids)) != len(self.hook_ids):
            raise ValueError("hook ids must be unique")
        return self


class SourceSidecar(ContractModel):
    """One exact source file of a constituent: path, plain SHA-256 of its bytes, and size."""

    constituent_id: Digest
    path: LogicalPath
    content_sha256: ContentSha256
    size: Count

    def sort_key(self) -> tuple[str, str]:
        return (self.constituent_id, self.path)


def ordinary_constituent_id(workload: CapturedWorkload) -> str:
    """The constituent id of a captured ordinary workload (persisted in parents: must never change)."""
    return digest(ORDINARY_CONSTITUENT_KIND, workload)


def integrity_subject_for(
    native: tuple[NativeConstituent, ...] | list[NativeConstituent],
    ordinary: tuple[OrdinaryConstituent, ...] | list[OrdinaryConstituent],
    sidecars: tuple[SourceSidecar, ...] | list[SourceSidecar],
) -> str:
    """The integrity subject of a development parent: one digest over every constituent and sidecar."""
    return digest(
        INTEGRITY_SUBJECT_KIND,
        {
            "native": [item.model_dump(mode="json") for item in native],
            "ordinary": [item.model_dump(mode="json") for item in ordinary],
            "sidecars": [item.model_dump(mode="json") for item in sidecars],
        },
    )


class DevelopmentReleaseSetV3(_ProfiledIdentity, _DevelopmentBinding):
    """The development parent: one immutable delivery of native and ordinary constituents."""

    KIND = RELEASE_SET_V3_SCHEMA

    schema_: Literal["dpone.release-set.v3"] = Field(default=RELEASE_SET_V3_SCHEMA, alias="schema")
    profile: Literal["development_workspace_delivery_v1"] = DEVELOPMENT_PROFILE
    native_constituents: sorted_unique(NativeConstituent, max_length=256, key=lambda item: item.constituent_id)
    ordinary_constituents: sorted_unique(OrdinaryConstituent, max_length=MAX_WORKLOADS, key=lambda item: item.pack_id)
    source_sidecars: sorted_unique(SourceSidecar, min_length=1, max_length=MAX_LIST * 4, key=SourceSidecar.sort_key)
    integrity_subject: Digest
    execution_subjects: sorted_unique(ExecutionSubject, max_length=MAX_WORKLOADS, key=ExecutionSubject.sort_key)
    route_certifications: NoRouteCertifications

    @model_validator(mode="after")
    def _closed_and_consistent(self) -> DevelopmentReleaseSetV3:
        if not self.native_constituents and not self.ordinary_constituents:
            raise ValueError("a development parent needs at least one constituent")
        ids = [item.constituent_id for item in self.native_constituents] + [
            item.constituent_id for item in self.ordinary_constituents
        ]
        if len(ids) != len(set(ids)):
            raise ValueError("constituent ids must be unique")
        selectors = [item.selector for item in self.ordinary_constituents]
        if len(selectors) != len(set(selectors)):
            raise ValueError("ordinary selectors must be unique")
        known = set(ids)
        if any(sidecar.constituent_id not in known for sidecar in self.source_sidecars):
            raise ValueError("every source sidecar must belong to a constituent")
        expected = integrity_subject_for(self.native_constituents, self.ordinary_constituents, self.source_sidecars)
        if self.integrity_subject != expected:
            raise ValueError("integrity_subject does not match the constituents and sidecars")
        return self


# ---------------------------------------------------------------------------------------------
# Production family (unchanged by the development family; minimal closed shapes)


class ProductionReleaseSetV1(_ProductionRelease):
    KIND = RELEASE_SET_V1_SCHEMA

    schema_: Literal["dpone.release-set.v1"] = Field(default=RELEASE_SET_V1_SCHEMA, alias="schema")
    constituents: sorted_unique(Digest, min_length=1, max_length=256)


class ProductionReleaseSetV2(_ProductionRelease):
    KIND = RELEASE_SET_V2_SCHEMA

    schema_: Literal["dpone.release-set.v2"] = Field(default=RELEASE_SET_V2_SCHEMA, alias="schema")
    artifact_wire: Literal["dpone.dbt-airflow-self-service.v2"] = ARTIFACT_WIRE
    source_repository_digest: Digest
    constituents: sorted_unique(Digest, min_length=1, max_length=256)


class ProductionCompositionV3(_ProfiledIdentity, _ProductionRelease):
    KIND = RELEASE_SET_V3_SCHEMA

    schema_: Literal["dpone.release-set.v3"] = Field(default=RELEASE_SET_V3_SCHEMA, alias="schema")
    profile: Literal["production_workspace_composition_v1", "production_plain_transfer_composition_v1"]
    source_repository_digest: Digest
    native_constituent: Digest
    plain_transfer_constituents: sorted_unique(Digest, max_length=256)


# ---------------------------------------------------------------------------------------------
# Synthetic family (validation campaigns over generated data only)


class SyntheticCompositionV3(_ProfiledIdentity, ContractModel):
    KIND = RELEASE_SET_V3_SCHEMA

    schema_: Literal["dpone.release-set.v3"] = Field(default=RELEASE_SET_V3_SCHEMA, alias="schema")
    profile: Literal["synthetic_composition_validation"] = SYNTHETIC_PROFILE
    purpose: Literal["synthetic_validation"]
    trust_tier: Literal["non_production"]
    data_class: Literal["synthetic"]
    campaign_id: Name
    constituents: sorted_unique(Digest, min_length=1, max_length=256)
