"""Re-export: the platform adapters live in `dpone_dagster.platform.target` (below both entry points).

What a reader could get wrong: this module defines nothing; import from `dpone_dagster.platform.target`
in new code (the deployment location must, it never imports `dpone_dagster.defs`).
"""

from dpone_dagster.platform.target import (
    GRANT_KEY,
    POLICY_KEY,
    PROTECTED_TARGET_SCHEMA,
    SIGNATURES_KEY,
    AuthorityBytes,
    AuthorityDocuments,
    PlatformError,
    ProtectedTarget,
    ProtectedTargetDocument,
    ensure_private_dir,
    object_store,
    s3_client,
)

__all__ = [
    "GRANT_KEY",
    "POLICY_KEY",
    "PROTECTED_TARGET_SCHEMA",
    "SIGNATURES_KEY",
    "AuthorityBytes",
    "AuthorityDocuments",
    "PlatformError",
    "ProtectedTarget",
    "ProtectedTargetDocument",
    "ensure_private_dir",
    "object_store",
    "s3_client",
]
