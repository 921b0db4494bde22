"""The deterministic source-archive builder: a checkout as a reproducible tar.gz.

`build_source_archive(checkout, destination)` writes sorted members, mtime 0, uid/gid 0, no owner
names, mode 0644 and gzip mtime 0, so identical checkouts give identical bytes (with the same zlib)
and the archive's snapshot equals the checkout's. `commit=` records the commit as the pax global
comment, as `git archive` does.

What a reader could get wrong: the archive is built from the files the checkout walk validated
(same name rules and caps as reading); a file that changes while it is archived is refused
(`source.changed_during_read`), never archived half-old.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.release.source.archive import CHUNK_BYTES, CheckoutFormat, SourceLimits, fail, read_chunks, shown
from dpone_dagster.release.source.snapshot import (
    DEFAULT_CHECKOUT_EXCLUDES,
    SourceFile,
    SourceSnapshot,
    _NullSink,
    _read_members,
)


@dataclass(frozen=True)
class BuiltArchive:
    sha256: str
    size: int
    snapshot: SourceSnapshot


def build_source_archive(
    checkout: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    limits: SourceLimits = SourceLimits(),
    exclude: frozenset[str] = DEFAULT_CHECKOUT_EXCLUDES,
    commit: str | None = None,
) -> BuiltArchive:
    """Write a deterministic tar.gz of `checkout` to `destination` (atomically) and describe it.

    `commit` (40 hex) is recorded as the pax global comment, as `git archive` does, so the archive
    can be bound to it (`source_binding.bind_source_commit`).
    """
    if commit is not None and (len(commit) != 40 or any(ch not in "0123456789abcdef" for ch in commit)):
        raise ValueError("commit must be 40 lowercase hex characters")
    global_headers = {"comment": commit} if commit is not None else {}
    checkout_format = CheckoutFormat(Path(checkout), exclude)
    snapshot = SourceSnapshot(_read_members(checkout_format, limits, _NullSink()))
    target = Path(destination)
    staging = tempfile.NamedTemporaryFile(dir=target.parent, prefix=".dpone-archive-", delete=False)  # noqa: SIM115
    try:
        with staging:
            with gzip.GzipFile(filename="", mode="wb", fileobj=staging, mtime=0, compresslevel=6) as compressed:
                with tarfile.open(
                    fileobj=compressed,
                    mode="w|",
                    format=tarfile.PAX_FORMAT,
                    bufsize=CHUNK_BYTES,
                    pax_headers=global_headers,
                ) as archive:
                    for item in snapshot.files:
                        _add_checkout_file(archive, checkout_format, item)
        os.chmod(staging.name, 0o644)
        os.replace(staging.name, target)
    except BaseException:
        Path(staging.name).unlink(missing_ok=True)
        raise
    hasher = hashlib.sha256()
    with open(target, "rb") as written:
        for chunk in read_chunks(written):
            hasher.update(chunk)
    return BuiltArchive(hasher.hexdigest(), target.stat().st_size, snapshot)


def _add_checkout_file(archive: tarfile.TarFile, checkout_format: CheckoutFormat, item: SourceFile) -> None:
    info = tarfile.TarInfo(item.path)
    info.size = item.size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    with checkout_format.open_file(item.path) as reader:
        hashing = _HashingReader(reader)
        try:
            archive.addfile(info, hashing)
        except OSError:
            raise fail("source.changed_during_read", f"{shown(item.path)} shrank while the archive was built") from None
        if reader.read(1) or hashing.hexdigest() != item.sha256:
            raise fail("source.changed_during_read", f"{shown(item.path)} changed while the archive was built")


class _HashingReader:
    def __init__(self, inner) -> None:
        self._inner = inner
        self._hasher = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._hasher.update(data)
        return data

    def hexdigest(self) -> str:
        return self._hasher.hexdigest()
