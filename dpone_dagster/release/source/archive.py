"""Hostile-input primitives for source reading: limits, member-name rules, metered streams, checkouts.

`source.py` drives these: it walks the members of one format (tar and tar.gz in `archive_tar.py`,
zip in `archive_zip.py`, a checkout directory here) through one generic pass that validates every
name and type, caps counts and bytes, and hashes while reading. The format modules parse their
headers themselves (never `tarfile`/`zipfile` readers, which cannot be bounded) and enforce what
only the format can know.

The one thing a reader could get wrong: a declared size (tar header, zip central record) is never
trusted on its own. Every cap is enforced again on the bytes actually read, and `check_member_name`
must see the raw name exactly as stored (a NUL inside a zip name is refused, not truncated).
"""

from __future__ import annotations

import io
import os
import stat
import unicodedata
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from dpone_dagster.contracts.bounds import MAX_WORKLOADS
from dpone_dagster.contracts.coded import CodedError

CHUNK_BYTES = 1024 * 1024
# The default member cap admits the most workloads any policy can grant (`max_workloads` is
# 1..MAX_WORKLOADS) at a realistic size: an ordinary flow is 6 members (its directory and `sql/`,
# flow.yaml, dag.yaml, pack.json, one SQL file), so 8 leaves room for two more SQL files; a dbt model
# is one or two. The rest of a project (macros, seeds, docs, schema files) gets the old cap on top.
MEMBERS_PER_WORKLOAD = 8
PROJECT_MEMBERS = 20_000
DEFAULT_MAX_MEMBERS = PROJECT_MEMBERS + MEMBERS_PER_WORKLOAD * MAX_WORKLOADS  # 100,000
MAX_EXTENDED_HEADER_BYTES = 64 * 1024
EntryKind = Literal["file", "dir", "symlink", "hardlink", "special"]


class SourceError(CodedError):
    """A source checkout or archive was refused; nothing was left behind."""

    codes = {
        "source.unsupported_format": "The source is neither a directory nor a tar, tar.gz or zip archive.",
        "source.archive_invalid": "The archive is corrupt or truncated (bad header, CRC or compressed stream).",
        "source.archive_too_large": "The archive file is larger than the source byte limit allows.",
        "source.changed_during_read": (
            "The source's bytes changed between the pre-scan and extraction or copy; read it again from a stable copy."
        ),
        "source.unreadable": (
            "A checkout file or directory could not be opened or read (permissions, or it vanished while being read)."
        ),
        "source.empty": "The source holds no files.",
        "source.absolute_path": "A member name is absolute; archives must hold relative paths only.",
        "source.path_traversal": "A member name contains a '..' or '.' component (path traversal).",
        "source.drive_letter": "A member name starts with a drive letter.",
        "source.invalid_path": (
            "A member name holds a NUL, a backslash, a control character, an empty component or non-UTF-8 bytes."
        ),
        "source.path_too_long": "A member name is longer or deeper than the limits allow.",
        "source.duplicate_member": "Two members have the same name.",
        "source.case_collision": "Two member names differ only by case or Unicode normalization.",
        "source.path_conflict": "A name is used both as a file and as a directory.",
        "source.link_member": "A member is a symbolic or hard link; only regular files and directories are accepted.",
        "source.special_member": "A member is a device, FIFO, socket, sparse or other special file.",
        "source.symlink_escape": "A checkout symlink points outside the checkout, at a directory, or nowhere.",
        "source.not_regular_file": (
            "The source path is neither a regular file nor a directory (a FIFO, device, socket or a link to one)."
        ),
        "source.unsupported_member": "A zip entry is encrypted.",
        "source.unsupported_compression": (
            "A zip entry is neither stored nor deflated (bzip2, LZMA and other methods are refused)."
        ),
        "source.ambiguous_archive": (
            "A zip has more than one end-of-central-directory record, or its end record and "
            "central directory disagree on the entries."
        ),
        "source.header_chain": (
            "A tar member is preceded by more than one extended header of one kind (chained pax "
            "or GNU long-name headers)."
        ),
        "source.global_header": (
            "A tar holds more than one pax global header, or one that sets anything but a comment or times."
        ),
        "source.stream_too_large": "The decompressed tar stream is larger than the source byte limit allows.",
        "source.checkout_not_commit": (
            "The source checkout is not exactly the configured commit: a committed file is edited or missing in the "
            "working tree (or, read whole, a file is not in the commit), or the commit holds a symlink or submodule. "
            "Commit or discard the changes, or deliver from a clean clone; untracked and ignored files are never read."
        ),
        "source.commit_unbound": (
            "The source cannot be bound to the configured commit: a checkout outside git, or an "
            "archive that records no commit."
        ),
        "source.commit_mismatch": (
            "The checkout's HEAD, or the commit an archive records, is not the configured source commit."
        ),
        "source.header_too_large": "A tar extended header (pax or GNU long name) is larger than allowed.",
        "source.overlapping_entries": "Zip entries share or overlap their bytes (a zip bomb construction).",
        "source.too_many_members": "The source holds more members than the limit allows.",
        "source.file_too_large": "A file is larger than the per-file byte limit.",
        "source.total_too_large": "The files together are larger than the total byte limit.",
        "source.compression_ratio": "Decompressed bytes exceed the allowed compression ratio (a decompression bomb).",
        "source.unsafe_member": (
            "Python's tar 'data' filter refused a member the primary checks accepted; refused as a second layer."
        ),
        "source.not_found": "A path was requested that is not part of the source snapshot.",
        "source.digest_drift": "A file's bytes no longer match the digest recorded when the source was read.",
    }


@dataclass(frozen=True)
class SourceLimits:
    """Caps on one source. Byte caps count bytes actually read, never sizes a header declares.

    The compression ratio is `decompressed / max(compressed, ratio_floor_bytes)`: small archives of
    very repetitive text are not bombs, so the ratio only bites above the floor. `max_members`
    counts directories too and defaults to `DEFAULT_MAX_MEMBERS` (the policy maximum of workloads at
    `MEMBERS_PER_WORKLOAD` each, plus `PROJECT_MEMBERS`); the source is read before any authority,
    so it cannot be the policy's own `max_workloads`, which the delivery budget enforces later.
    """

    max_members: int = DEFAULT_MAX_MEMBERS
    max_file_bytes: int = 64 * 1024 * 1024
    max_total_bytes: int = 512 * 1024 * 1024
    max_compression_ratio: int = 200
    ratio_floor_bytes: int = 1024 * 1024
    max_path_bytes: int = 1024
    max_component_bytes: int = 255
    max_depth: int = 32

    @property
    def max_archive_bytes(self) -> int:
        """An archive can only exceed its content by headers and padding (generously 8 KiB a member)."""
        return self.max_total_bytes + 8192 * self.max_members + CHUNK_BYTES


@dataclass
class Entry:
    """One member as a format reports it. `reader` is valid only until the next entry is requested."""

    raw_name: str
    kind: EntryKind
    declared_size: int
    reader: BinaryIO | None = None


def fail(code: str, message: str) -> SourceError:
    return SourceError(code, message)


def shown(name: str) -> str:
    """A member name safe to put in a message: escaped and truncated."""
    text = name.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return repr(text if len(text) <= 120 else text[:117] + "...")


# ---------------------------------------------------------------------------------------------
# Member names


def check_member_name(raw: str, *, is_dir: bool, limits: SourceLimits) -> str:
    """Validate a raw member name and return it as a clean relative POSIX path.

    A single leading `./` (tar's convention) and, for directories, trailing slashes are removed;
    the archive root itself (a directory named `.` or `./`) comes back as `""`. Everything else
    that is not a plain relative path is refused.
    """
    if not isinstance(raw, str):
        raise fail("source.invalid_path", "a member name is not text")
    if "\x00" in raw:
        raise fail("source.invalid_path", f"member name {shown(raw)} holds a NUL byte")
    if "\\" in raw:
        raise fail("source.invalid_path", f"member name {shown(raw)} holds a backslash")
    if is_dir and raw in (".", "./"):
        return ""
    name = raw[2:] if raw.startswith("./") and len(raw) > 2 else raw
    if is_dir:
        name = name.rstrip("/")
    if name.startswith("/"):
        raise fail("source.absolute_path", f"member name {shown(raw)} is absolute")
    if len(name) >= 2 and name[1] == ":" and name[0].isascii() and name[0].isalpha():
        raise fail("source.drive_letter", f"member name {shown(raw)} starts with a drive letter")
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or 0xD800 <= ord(ch) <= 0xDFFF for ch in name):
        raise fail("source.invalid_path", f"member name {shown(raw)} holds a control character or non-UTF-8 bytes")
    parts = name.split("/")
    if any(part in (".", "..") for part in parts):
        raise fail("source.path_traversal", f"member name {shown(raw)} has a '.' or '..' component")
    if any(part == "" for part in parts):
        raise fail("source.invalid_path", f"member name {shown(raw)} has an empty component")
    encoded = name.encode("utf-8")
    if (
        len(encoded) > limits.max_path_bytes
        or len(parts) > limits.max_depth
        or any(len(part.encode("utf-8")) > limits.max_component_bytes for part in parts)
    ):
        raise fail("source.path_too_long", f"member name {shown(raw)} is too long or too deep")
    return name


def fold(path: str) -> str:
    """The key under which two names collide on a case-insensitive or normalizing filesystem."""
    return unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", path).casefold())


class NameRegistry:
    """Every path seen so far, including implied parent directories, for collision checks."""

    def __init__(self) -> None:
        self._kinds: dict[str, tuple[str, bool]] = {}
        self._folded: dict[str, str] = {}

    def add(self, path: str, kind: Literal["file", "dir"]) -> None:
        parts = path.split("/")
        for index in range(1, len(parts)):
            self._claim("/".join(parts[:index]), "dir", explicit=False)
        self._claim(path, kind, explicit=True)

    def _claim(self, path: str, kind: str, *, explicit: bool) -> None:
        key = fold(path)
        holder = self._folded.get(key)
        if holder is not None and holder != path:
            raise fail(
                "source.case_collision", f"members {shown(holder)} and {shown(path)} collide by case or normalization"
            )
        existing = self._kinds.get(path)
        if existing is None:
            self._kinds[path] = (kind, explicit)
            self._folded[key] = path
            return
        existing_kind, existing_explicit = existing
        if existing_kind != kind:
            raise fail("source.path_conflict", f"{shown(path)} is both a file and a directory")
        if explicit and existing_explicit:
            raise fail("source.duplicate_member", f"member {shown(path)} appears twice")
        if explicit:
            self._kinds[path] = (kind, True)


# ---------------------------------------------------------------------------------------------
# Metered streams


class MeteredReader(io.RawIOBase):
    """Reads from `inner` in bounded chunks, counting bytes and calling `on_chunk` for each chunk.

    Decoder failures of the wrapped stream (corrupt deflate data, bad CRC, truncation) surface as
    `source.archive_invalid`, wherever the read happens.
    """

    def __init__(self, inner: BinaryIO, on_chunk: Callable[[bytes], None]) -> None:
        super().__init__()
        self._inner = inner
        self._on_chunk = on_chunk
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer)
        try:
            data = self._inner.read(min(len(view), CHUNK_BYTES))
        except SourceError:
            raise
        except _DECODER_ERRORS as error:
            raise fail(
                "source.archive_invalid", f"the archive data is corrupt or truncated ({type(error).__name__})"
            ) from None
        if not data:
            return 0
        self.count += len(data)
        self._on_chunk(data)
        view[: len(data)] = data
        return len(data)


_DECODER_ERRORS = (EOFError, OSError, ValueError, zlib.error)


class RatioGuard:
    """Refuses once decompressed bytes outgrow the compressed bytes consumed so far."""

    def __init__(self, limits: SourceLimits, compressed: Callable[[], int]) -> None:
        self._limits = limits
        self._compressed = compressed
        self.decompressed = 0

    def add(self, count: int) -> None:
        self.decompressed += count
        basis = max(self._compressed(), self._limits.ratio_floor_bytes)
        if self.decompressed > self._limits.max_compression_ratio * basis:
            raise fail(
                "source.compression_ratio",
                f"decompressed bytes exceed {self._limits.max_compression_ratio}x the compressed bytes",
            )


def read_chunks(reader: BinaryIO) -> Iterator[bytes]:
    while chunk := reader.read(CHUNK_BYTES):
        yield chunk


# ---------------------------------------------------------------------------------------------
# Formats (tar: archive_tar.py, zip: archive_zip.py, checkouts here). Each yields Entry values;
# `archive_sha256()` is final once iteration has finished.


def sniff_format(head: bytes) -> Literal["gzip", "zip", "tar"] | None:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


class CheckoutFormat:
    """A checkout directory walked without following directory symlinks; excluded names are skipped,
    and with `only` every path that is neither one of those files nor a folder holding one.

    A symlink to a regular file inside the checkout is read as that file's content; any other
    symlink (outside, to a directory, dangling) is refused.
    """

    def __init__(self, root: Path, exclude: frozenset[str], only: frozenset[str] | None = None) -> None:
        self._root = Path(os.path.realpath(root))
        self._exclude = exclude
        self._only = only
        self._only_dirs = (
            None
            if only is None
            else frozenset(path.rsplit("/", depth)[0] for path in only for depth in range(1, path.count("/") + 1))
        )
        self._origins: dict[str, str] = {}

    def entries(self) -> Iterator[Entry]:
        self._origins = {}
        yield from self._walk(self._root, "")

    def open_file(self, name: str) -> BinaryIO:
        """Reopen a file seen by the last walk (symlinks already resolved and confined)."""
        return open(self._origins[name], "rb", opener=_no_follow_opener)

    def _walk(self, directory: Path, prefix: str) -> Iterator[Entry]:
        with os.scandir(directory) as listing:
            items = sorted(listing, key=lambda item: item.name)
        for item in items:
            if item.name in self._exclude:
                continue
            name = prefix + item.name
            if self._only is not None and name not in self._only and name not in self._only_dirs:
                continue  # not a file of the commit being read (untracked, ignored): never read
            if item.is_dir(follow_symlinks=False):
                yield Entry(name, "dir", 0)
                yield from self._walk(Path(item.path), name + "/")
            elif item.is_symlink() or item.is_file(follow_symlinks=False):
                self._origins[name] = self._resolve_link(item.path, name) if item.is_symlink() else item.path
                with self.open_file(name) as reader:
                    yield Entry(name, "file", os.fstat(reader.fileno()).st_size, reader)
            else:
                yield Entry(name, "special", 0)

    def _resolve_link(self, link: str, name: str) -> str:
        target = os.path.realpath(link)
        inside = os.path.commonpath([target, str(self._root)]) == str(self._root)
        if not inside or not os.path.isfile(target):
            raise fail(
                "source.symlink_escape",
                f"symlink {shown(name)} points outside the checkout, at a directory, or nowhere",
            )
        return target

    def archive_sha256(self) -> str:
        return ""


def _no_follow_opener(path: str, flags: int) -> int:
    descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise fail("source.special_member", "a checkout file changed into a special file while being read")
    return descriptor
