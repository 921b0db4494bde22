"""Confined source reading: a checkout directory or a source archive (tar, tar.gz, zip) as hostile input.

`open_source(path)` returns a `SourceTree`: a private (0700) copy of the source under `work_dir`,
the `SourceSnapshot` of every file in it (path, SHA-256, size) and, for an archive, the SHA-256 of
the archive bytes. Reading happens in two passes over the same open file: the pre-scan validates
every member (regular files and directories only; no absolute, `..`, backslash, drive-letter, NUL,
duplicate or case-fold-colliding names) and enforces member, per-file, total and compression-ratio
caps on the bytes actually read, all before anything is written; extraction then writes each file
with `O_EXCL | O_NOFOLLOW` below directory descriptors, hashes it again, and must reproduce the
pre-scan exactly. For tar, Python's `data` filter runs as a second layer after these checks.

`open_source` refuses a source path that is not a regular file or a directory (a FIFO would block
the open) before opening it. An archive's own record of its commit (`git archive`'s pax global or
zip comment) is kept as `SourceTree.declared_commit` for `source_binding.bind_source_commit`.

`build_source_archive(checkout, destination)` (module `source_builder`, which imports this one; never
the other way round, the import-graph test refuses a cycle) writes a
deterministic tar.gz of a checkout (sorted
members, mtime 0, uid/gid 0, no owner names, fixed modes, gzip mtime 0), so identical checkouts give
identical bytes (with the same zlib) and the archive's snapshot equals the checkout's.

The one thing a reader could get wrong: the snapshot digest (`SourceSnapshot.digest`) identifies the
*files* (sorted `(path, sha256)` pairs), not the archive; a checkout and its built archive share it,
while `archive_sha256` differs by container. Read files through `SourceTree.read_bytes`, which
re-verifies each file against the snapshot, never by opening paths under `root` yourself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

from dpone_dagster.contracts.identity import digest
from dpone_dagster.release.source.archive import (
    CheckoutFormat,
    NameRegistry,
    SourceError,
    SourceLimits,
    check_member_name,
    fail,
    read_chunks,
    shown,
    sniff_format,
)
from dpone_dagster.release.source.tar import TarFormat
from dpone_dagster.release.source.zip import ZipFormat

SNAPSHOT_KIND = "dpone.source-snapshot.v1"
SNAPSHOT_SCHEMA = "dpone.source-snapshot.v1"
DEFAULT_CHECKOUT_EXCLUDES = frozenset(
    {".git", ".dpone", ".venv", "__pycache__", "dbt_packages", "logs", "target", ".user.yml"}
)
"""Build output and per-user state, never source: `.user.yml` is the id file dbt writes beside profiles.yml at
its first run (a run elsewhere could otherwise change a snapshot between two reads of one release run)."""
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

__all__ = [
    "DEFAULT_CHECKOUT_EXCLUDES",
    "SourceError",
    "SourceFile",
    "SourceLimits",
    "SourceReader",
    "SourceSnapshot",
    "SourceTree",
    "open_source",
]


@dataclass(frozen=True)
class SourceFile:
    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class SourceSnapshot:
    """Every file of a source, sorted by path (UTF-8 byte order)."""

    files: tuple[SourceFile, ...]
    _index: dict[str, SourceFile] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {item.path: item for item in self.files})

    @cached_property
    def digest(self) -> str:
        """Domain-separated identity over sorted `[path, sha256]` pairs. Persisted: must never change."""
        return digest(SNAPSHOT_KIND, [[item.path, item.sha256] for item in self.files])

    @property
    def total_bytes(self) -> int:
        return sum(item.size for item in self.files)

    def get(self, path: str) -> SourceFile | None:
        return self._index.get(path)

    def under(self, prefix: str) -> tuple[SourceFile, ...]:
        """Files whose path starts with directory `prefix` (no trailing slash)."""
        start = prefix.rstrip("/") + "/"
        return tuple(item for item in self.files if item.path.startswith(start))

    def document(self) -> dict[str, object]:
        """The snapshot as a canonical-JSON-ready sidecar document."""
        return {
            "schema": SNAPSHOT_SCHEMA,
            "digest": self.digest,
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in self.files],
        }


@runtime_checkable
class SourceReader(Protocol):
    """Read-only access to a verified source: its snapshot and each file's verified bytes."""

    @property
    def snapshot(self) -> SourceSnapshot: ...

    def read_bytes(self, path: str) -> bytes: ...


class SourceTree:
    """A private, verified copy of a source. Close it (or use `with`) to delete the copy."""

    def __init__(self, root: Path, snapshot: SourceSnapshot, archive_sha256: str | None) -> None:
        self._root = root
        self._snapshot = snapshot
        self.archive_sha256 = archive_sha256
        self.declared_commit: str | None = None

    @property
    def root(self) -> Path:
        """The private directory holding the copy (for tools such as dbt that need a directory)."""
        return self._root

    @property
    def snapshot(self) -> SourceSnapshot:
        return self._snapshot

    def read_bytes(self, path: str) -> bytes:
        """The bytes of `path`, re-verified against the snapshot (`source.digest_drift` otherwise)."""
        entry = self._snapshot.get(path)
        if entry is None:
            raise fail("source.not_found", f"{shown(path)} is not part of the source snapshot")
        try:
            descriptor = _open_confined(self._root, path)
        except OSError:
            raise fail(
                "source.digest_drift", f"{shown(path)} can no longer be opened inside the private copy"
            ) from None
        with os.fdopen(descriptor, "rb") as reader:
            data = reader.read(entry.size + 1)
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise fail("source.digest_drift", f"{shown(path)} no longer matches its snapshot digest")
        return data

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> SourceTree:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def open_source(
    path: str | os.PathLike[str],
    *,
    work_dir: str | os.PathLike[str] | None = None,
    limits: SourceLimits = SourceLimits(),
    exclude: frozenset[str] = DEFAULT_CHECKOUT_EXCLUDES,
    only: frozenset[str] | None = None,
) -> SourceTree:
    """Read a checkout directory or an archive into a fresh private copy under `work_dir`.

    `exclude` names directories/files skipped at any depth of a checkout; `only` (a checkout's
    relative file paths, the files of a commit) skips every other file; archives are taken whole.
    """
    source = Path(os.path.realpath(path))
    try:
        status = os.lstat(source)
    except OSError:
        raise fail("source.unreadable", "the source path cannot be found or read") from None
    if stat.S_ISDIR(status.st_mode):
        return _materialize(lambda: CheckoutFormat(source, exclude, only), limits, work_dir, archive=False)
    if not stat.S_ISREG(status.st_mode):
        raise fail("source.not_regular_file", "the source path is neither a regular file nor a directory")
    try:
        descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise fail("source.unreadable", "the source archive cannot be opened") from None
    with open(descriptor, "rb", closefd=True) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (status.st_dev, status.st_ino):
            raise fail("source.not_regular_file", "the source path changed into something other than a regular file")
        if info.st_size > limits.max_archive_bytes:
            raise fail("source.archive_too_large", "the archive is larger than the source byte limit allows")
        kind = sniff_format(handle.read(512))
        filter_root = os.path.join(tempfile.gettempdir(), "dpone-source-filter-root")
        if kind in ("gzip", "tar"):
            fmt = TarFormat(handle, limits, compressed=kind == "gzip", filter_root=filter_root)
        elif kind == "zip":
            fmt = ZipFormat(handle, limits, info.st_size)
        else:
            raise fail("source.unsupported_format", "the source is not a tar, tar.gz or zip archive")
        tree = _materialize(lambda: fmt, limits, work_dir, archive=True)
        tree.declared_commit = fmt.declared_commit
        return tree


def _materialize(make_format: Callable[[], object], limits: SourceLimits, work_dir, *, archive: bool) -> SourceTree:
    fmt = make_format()
    scanned = _read_members(fmt, limits, _NullSink())
    scanned_sha = fmt.archive_sha256()
    root = Path(tempfile.mkdtemp(prefix="dpone-source-", dir=work_dir))
    try:
        os.chmod(root, 0o700)
        with _PrivateWriter(root) as writer:
            written = _read_members(fmt, limits, writer)
        if written != scanned or fmt.archive_sha256() != scanned_sha:
            raise fail("source.changed_during_read", "the source changed between the pre-scan and extraction")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return SourceTree(root, SourceSnapshot(written), scanned_sha if archive else None)


def _read_members(fmt, limits: SourceLimits, sink) -> tuple[SourceFile, ...]:
    """One full pass: validate every member, enforce caps on bytes actually read, hash, hand to `sink`."""
    registry = NameRegistry()
    members = 0
    total = 0
    files: list[SourceFile] = []
    try:
        for entry in fmt.entries():
            members += 1
            if members > limits.max_members:
                raise fail("source.too_many_members", f"the source holds more than {limits.max_members} members")
            if entry.kind in ("symlink", "hardlink"):
                raise fail("source.link_member", f"member {shown(entry.raw_name)} is a link")
            if entry.kind == "special":
                raise fail(
                    "source.special_member", f"member {shown(entry.raw_name)} is not a regular file or directory"
                )
            path = check_member_name(entry.raw_name, is_dir=entry.kind == "dir", limits=limits)
            if entry.kind == "dir":
                if path:
                    registry.add(path, "dir")
                    sink.directory(path)
                continue
            registry.add(path, "file")
            if entry.declared_size > limits.max_file_bytes:
                raise fail("source.file_too_large", f"member {shown(path)} exceeds {limits.max_file_bytes} bytes")
            if total + entry.declared_size > limits.max_total_bytes:
                raise fail("source.total_too_large", f"the source exceeds {limits.max_total_bytes} bytes")
            hasher = hashlib.sha256()
            size = 0
            with sink.file(path) as write:
                for chunk in read_chunks(entry.reader):
                    size += len(chunk)
                    total += len(chunk)
                    if size > limits.max_file_bytes:
                        raise fail(
                            "source.file_too_large", f"member {shown(path)} exceeds {limits.max_file_bytes} bytes"
                        )
                    if total > limits.max_total_bytes:
                        raise fail("source.total_too_large", f"the source exceeds {limits.max_total_bytes} bytes")
                    hasher.update(chunk)
                    write(chunk)
            if size != entry.declared_size:
                raise fail(
                    "source.changed_during_read", f"member {shown(path)} does not have the size its header declares"
                )
            files.append(SourceFile(path, hasher.hexdigest(), size))
    except SourceError:
        raise
    except OSError:
        raise fail("source.unreadable", "a source file or directory could not be read") from None
    if not files:
        raise fail("source.empty", "the source holds no files")
    return tuple(sorted(files, key=lambda item: item.path.encode("utf-8")))


class _NullSink:
    def directory(self, _path: str) -> None:
        return None

    @contextmanager
    def file(self, _path: str) -> Iterator[Callable[[bytes], None]]:
        yield _discard


def _discard(_chunk: bytes) -> None:
    return None


class _PrivateWriter:
    """Creates directories (0700) and files (0600, O_EXCL) below a root without following any link."""

    def __init__(self, root: Path) -> None:
        self._root_fd = os.open(root, _DIRECTORY_FLAGS)

    def __enter__(self) -> _PrivateWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        os.close(self._root_fd)

    def directory(self, path: str) -> None:
        os.close(self._descend(path.split("/")))

    @contextmanager
    def file(self, path: str) -> Iterator[Callable[[bytes], None]]:
        parts = path.split("/")
        parent = self._descend(parts[:-1])
        try:
            descriptor = os.open(
                parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
            )
        finally:
            os.close(parent)
        try:
            yield lambda chunk: _write_all(descriptor, chunk)
        finally:
            os.close(descriptor)

    def _descend(self, parts: list[str]) -> int:
        current = os.dup(self._root_fd)
        try:
            for part in parts:
                try:
                    os.mkdir(part, 0o700, dir_fd=current)
                except FileExistsError:
                    pass
                following = os.open(part, _DIRECTORY_FLAGS, dir_fd=current)
                os.close(current)
                current = following
        except BaseException:
            os.close(current)
            raise
        return current


def _write_all(descriptor: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    while view:
        view = view[os.write(descriptor, view) :]


def _open_confined(root: Path, path: str) -> int:
    parts = path.split("/")
    current = os.open(root, _DIRECTORY_FLAGS)
    try:
        for part in parts[:-1]:
            following = os.open(part, _DIRECTORY_FLAGS, dir_fd=current)
            os.close(current)
            current = following
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
    finally:
        os.close(current)
