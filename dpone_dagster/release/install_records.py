"""Where the release cache's records used to live; they are contracts now (`contracts.release_records`).

Kept only so existing importers (`dpone_dagster.cli.release`) keep working until they import from
`dpone_dagster.contracts.release_records`; new code must not import from here.
"""

from __future__ import annotations

from dpone_dagster.contracts.release_records import (
    ActivationAction,
    ActivationIntent,
    AuditEntry,
    AuthorizedBy,
    CurrentPointer,
    DeploymentRecord,
)

__all__ = ["ActivationAction", "ActivationIntent", "AuditEntry", "AuthorizedBy", "CurrentPointer", "DeploymentRecord"]
