"""S3 keys per access: the warning when an attach falls back to the lake's own (writer) key.

A fork attaches its own data path with the storage's `fork_*` keys and its ancestors' with the
`read_only_*` keys (`attach.storage_secret_statement`); when those are not configured the lake's own
key is used, and S3 itself no longer refuses a write from the fork there. That is said once per
process and path, here, when the fork builder makes each attach (`fork.py: secret_and_attach`).

What a reader could get wrong: this only warns. Which key an attach carries is decided by
`attach.py`; the PostgreSQL roles that make ancestors read-only below DuckLake are
`lake/lifecycle/roles.py`.
"""

from __future__ import annotations

import logging

from dpone_dagster.config import StorageConfig
from dpone_dagster.lake.resolution.attach import s3_credential_envs

log = logging.getLogger(__name__)

_WARNED: set[tuple[str, str]] = set()


def s3_access_warning(storage, data_path: str, access: str) -> str | None:
    """The warning for an `s3://` path whose `read`/`fork` credentials are not configured (the
    lake's own credentials are used instead); logged once per process and path."""
    if not data_path.startswith("s3://") or access == "owner":
        return None
    if s3_credential_envs(storage or StorageConfig(), access):
        return None
    kind = "read_only_key_id_env/read_only_secret_env" if access == "read" else "fork_key_id_env/fork_secret_env"
    message = (
        f"storage of {data_path} has no {kind}: the lake's own (writer) S3 credentials are used, so "
        "S3 does not refuse writes there from this fork (see docs/forks.md, read-only ancestors)"
    )
    if (data_path, access) not in _WARNED:
        _WARNED.add((data_path, access))
        log.warning(message)
    return message
