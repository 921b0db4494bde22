"""Object-storage adapters for fork cleanup: S3 (boto3) and local folders, behind `ObjectStorePort`.

Both delete only under a fork data prefix: the prefix must end with `/` and contain a
`/__wm_forks/<segment>/` component. Cleanup checks the exact registered prefix before calling; this
second guard makes sure no adapter can ever be pointed at a lake's own data. The one exception is
`S3Prefixes.delete_copy`: promotion takes back an object it server-side copied into a parent a
moment earlier in the same process, after the parent's transaction rolled back (nothing refers to it).

What a reader could get wrong: S3 credentials are resolved from the *given* storage identity at
call time (environment-variable names), not from the current configuration; cleanup passes the
identity registered when the fork attached, or the donor workspace's when those are gone.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dpone_dagster.config import StorageConfig, resolve_secret
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import CredentialResolver
from dpone_dagster.lake.ports import ObjectStorePort
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR

_FORK_PREFIX = re.compile(rf"/{FORK_DATA_DIR}/[a-z0-9_]+_[0-9a-f]{{8}}/")


class StorageUnreachableError(LakeError):
    code = "lake.storage_unreachable"


class UnsafePrefixError(LakeError):
    code = "lake.unsafe_prefix"


def require_fork_prefix(prefix: str) -> str:
    if not prefix.endswith("/") or not _FORK_PREFIX.search(prefix):
        raise UnsafePrefixError("refusing to delete outside a fork data prefix")
    return prefix


def split_s3(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


@dataclass
class S3Prefixes:
    credentials: CredentialResolver = resolve_secret

    def _client(self, storage: StorageConfig | None):
        import boto3
        from botocore.config import Config

        storage = storage or StorageConfig()
        kwargs: dict = {"region_name": storage.region}
        if storage.endpoint:
            scheme = "https" if storage.use_ssl else "http"
            kwargs["endpoint_url"] = f"{scheme}://{storage.endpoint}"
        if storage.key_id_env and storage.secret_env:
            kwargs["aws_access_key_id"] = self.credentials(storage.key_id_env)
            kwargs["aws_secret_access_key"] = self.credentials(storage.secret_env)
        if storage.session_token_env:
            kwargs["aws_session_token"] = self.credentials(storage.session_token_env)
        style = "path" if storage.url_style == "path" else "virtual"
        config = Config(
            s3={"addressing_style": style},
            connect_timeout=5,
            read_timeout=30,
            retries={"max_attempts": 2, "mode": "standard"},
        )
        return boto3.client("s3", config=config, **kwargs)

    def list_prefix(self, prefix: str, storage: StorageConfig | None) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3(prefix)
        try:
            pages = self._client(storage).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
            return [f"s3://{bucket}/{o['Key']}" for page in pages for o in page.get("Contents", [])]
        except (BotoCoreError, ClientError) as exc:
            raise StorageUnreachableError(f"object storage could not be listed ({type(exc).__name__})") from None

    def delete_prefix(self, prefix: str, storage: StorageConfig | None) -> int:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _ = split_s3(require_fork_prefix(prefix))
        keys = [url.removeprefix(f"s3://{bucket}/") for url in self.list_prefix(prefix, storage)]
        client = self._client(storage)
        try:
            for start in range(0, len(keys), 1000):
                batch = [{"Key": k} for k in keys[start : start + 1000]]
                answer = client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                if answer.get("Errors"):
                    raise StorageUnreachableError("object storage refused to delete some objects")
        except (BotoCoreError, ClientError) as exc:
            raise StorageUnreachableError(f"object storage could not delete ({type(exc).__name__})") from None
        return len(keys)

    def copy_object(self, source: str, target: str, storage: StorageConfig | None) -> None:
        """A server-side copy within one bucket (promotion: no byte passes through this process).
        Never deletes: the source stays for its owner's cleanup."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3(source)
        target_bucket, target_key = split_s3(target)
        if bucket != target_bucket:
            raise UnsafePrefixError("a server-side copy stays within one bucket")
        try:
            self._client(storage).copy_object(Bucket=bucket, Key=target_key, CopySource={"Bucket": bucket, "Key": key})
        except (BotoCoreError, ClientError) as exc:
            raise StorageUnreachableError(f"object storage could not copy ({type(exc).__name__})") from None

    def delete_copy(self, target: str, storage: StorageConfig | None) -> None:
        """Delete one object `copy_object` made (only for its caller's rolled-back copy)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3(target)
        try:
            self._client(storage).delete_object(Bucket=bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise StorageUnreachableError(f"object storage could not delete ({type(exc).__name__})") from None


@dataclass
class LocalPrefixes:
    def list_prefix(self, prefix: str, storage: StorageConfig | None) -> list[str]:
        root = Path(prefix)
        return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.is_dir() else []

    def delete_prefix(self, prefix: str, storage: StorageConfig | None) -> int:
        root = Path(require_fork_prefix(prefix))
        count = len(self.list_prefix(prefix, storage))
        if root.is_dir():
            shutil.rmtree(root)
        return count


@dataclass
class StorageAdapters:
    """Picks the adapter for a prefix; tests replace one with a failing fake."""

    s3: ObjectStorePort = field(default_factory=S3Prefixes)
    local: ObjectStorePort = field(default_factory=LocalPrefixes)

    def for_prefix(self, prefix: str) -> ObjectStorePort:
        if prefix.startswith("s3://"):
            return self.s3
        if "://" in prefix:
            raise UnsafePrefixError("only s3:// and local data paths can be cleaned up")
        return self.local
