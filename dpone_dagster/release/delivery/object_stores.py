"""The two `ObjectStore` adapters behind the release registry: a local directory and S3.

Both give the same guarantee: `put_if_absent` is atomic and never replaces an existing object.
- Local directory (the embedded default, under the state dir): the bytes go to a private temporary
  file that is fsynced and then hard-linked into place; `link(2)` fails when the name exists, so
  creation is atomic and no-clobber even between processes. Inside `batch()` (the registry's blob
  writes) the temporaries are written without an fsync each; when the block exits they are made
  durable together (one `syncfs`), only then linked into place, and the directories fsynced once.
  A crash inside a batch leaves temporaries, never a named object whose bytes were not on disk.
- S3: a `PutObject` with `If-None-Match: *` (S3 and moto honour it; the store answers 412 when the
  key exists). For S3-compatible stores without conditional writes, `conditional_writes=False`
  falls back to HEAD-then-PUT, which has a race window: two writers that both see "absent" both
  write. The registry stays correct because every key is content-addressed (both writers put the
  same bytes) and a publication rereads every byte before reporting; only the "zero bytes written"
  claim of an identical retry can be wrong in that window.

What a reader could get wrong: keys are validated here (no `..`, no absolute paths, a narrow
character set) so a hostile release id or member path can never escape the store's root.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpone_dagster.release.errors import RegistryError
from dpone_dagster.release.source.local_files import fsync_path, sync_filesystem

_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*$")
_MAX_KEY = 512


def require_key(key: str) -> str:
    """Return `key` when it is a safe relative object key, else raise `release.invalid_key`."""
    if not isinstance(key, str) or len(key) > _MAX_KEY or not _KEY.fullmatch(key) or ".." in key:
        raise RegistryError("release.invalid_key", "an object key is not a safe relative key")
    return key


class LocalDirectoryStore:
    """Objects as files under `root`; temporaries live in `root/.staging` on the same filesystem."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._batch = threading.local()  # `.pending`: target -> unsynced temporary, in the thread inside `batch()`

    @property
    def _batched(self) -> dict[Path, str] | None:
        return getattr(self._batch, "pending", None)

    @_batched.setter
    def _batched(self, pending: dict[Path, str] | None) -> None:
        self._batch.pending = pending

    def _path(self, key: str) -> Path:
        return self.root / require_key(key)

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def put_if_absent(self, key: str, data: bytes) -> bool:
        target = self._path(key)
        if target.exists() or (self._batched is not None and target in self._batched):
            return False
        staging = self.root / ".staging"
        staging.mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=staging)
        if self._batched is not None:  # written now, synced and linked when the batch exits
            self._batched[target] = temp
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return True
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temp, target)
            except FileExistsError:
                return False
            fsync_path(target.parent)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Objects put inside the block appear, durable, when it exits without an error (see the module
        docstring); until then `get` does not see them, and `put_if_absent`'s True means "staged".
        Only the thread that opened the batch stages: another thread's `put_if_absent` on the same
        store writes durably at once, as outside a batch. For content-addressed keys only: a name that
        appears meanwhile is taken to hold the same bytes (the registry rereads every byte after the batch)."""
        if self._batched is not None:
            raise RegistryError("release.registry_unavailable", "a local store batch is already open")
        self._batched = {}
        try:
            yield
            pending, self._batched = self._batched, None
            self._link_durably(pending)
        finally:
            for temp in (self._batched or {}).values():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
            self._batched = None

    def _link_durably(self, pending: dict[Path, str]) -> None:
        try:
            if pending and not sync_filesystem(self.root / ".staging"):
                for temp in pending.values():
                    fsync_path(temp)
            for target, temp in pending.items():
                with contextlib.suppress(FileExistsError):  # a concurrent writer's identical object
                    os.link(temp, target)
            for folder in {target.parent for target in pending}:
                fsync_path(folder)
        finally:
            for temp in pending.values():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)

    def keys(self, prefix: str = "") -> Iterator[str]:
        if not self.root.is_dir():
            return iter(())
        found = []
        for path in self.root.rglob("*"):
            relative = path.relative_to(self.root).as_posix()
            if relative.startswith(".staging") or not path.is_file():
                continue
            if relative.startswith(prefix):
                found.append(relative)
        return iter(sorted(found))

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()


class S3Store:
    """Objects under `prefix` in one bucket, through any boto3 S3 client."""

    def __init__(self, client: Any, bucket: str, prefix: str = "", *, conditional_writes: bool = True) -> None:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        if prefix:
            require_key(prefix.rstrip("/"))
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.conditional_writes = conditional_writes

    def _key(self, key: str) -> str:
        return self.prefix + require_key(key)

    def get(self, key: str) -> bytes | None:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.NoSuchKey:
            return None
        return response["Body"].read()

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                return False
            raise
        return True

    def put_if_absent(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        if not self.conditional_writes:
            if self.exists(key):
                return False
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
            return True
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 412 or exc.response.get("Error", {}).get("Code") == "PreconditionFailed":
                return False
            raise
        return True

    def keys(self, prefix: str = "") -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            for item in page.get("Contents", []):
                yield item["Key"][len(self.prefix) :]

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
