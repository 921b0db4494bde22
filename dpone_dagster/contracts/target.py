"""Protected target configuration and the integrity-checked deployment projection.

Target admission decides the environment and trust tier of a protected operation from exactly two
sources: `TargetConfiguration` (protected configuration owned by the platform, carrying the pinned
policy digest) and `DeploymentProjection` (the environment and tier recorded in the integrity-checked
deployment, as the release services read it back). The one thing a reader could get wrong: neither
model may be built from bundle labels, database names, CLI flags or copied files; the tier field
admits `production` only so that a production target can be *recognized and refused*.
"""

from __future__ import annotations

from typing import Literal

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import Digest, Identifier, Name

TrustTier = Literal["non_production", "production"]


class TargetConfiguration(ContractModel):
    """The protected description of one delivery target."""

    environment: Name
    trust_tier: TrustTier
    policy_digest: Digest


class DeploymentProjection(ContractModel):
    """What the integrity-checked deployment says about itself, including the grant it was built under."""

    release_id: Digest
    deployment_id: Identifier
    environment: Name
    trust_tier: TrustTier
    grant_digest: Digest
