"""Hostile-input primitives for source reading: limits, member-name rules, and per-format member streams.

`source.py` drives these: it walks the members of one format (tar, tar.gz, zip, or a checkout
directory) through one generic pass that validates every name and type, caps counts and bytes, and
hashes while reading. This module only turns each format into a stream of `Entry` values and
enforces what only the format can know: tar extended-header sizes, the gzip/zip compression ratio
over bytes actually decompressed, and zip central-directory sanity (entry count read from the end
record before `zipfile` parses anything, and no two entries sharing bytes: CVE-2024-0450).

The one thing a reader could get wrong: a declared size (tar header, zip `file_size`) is never
trusted on its own. Every cap is enforced again on the bytes actually read, and `check_member_name`
must see the raw name as stored (`ZipInfo.orig_filename`, not `filename`, which zipfile truncates
at a NUL byte).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import stat
import struct
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from dpone_dagster.contracts.coded import CodedError

CHUNK_BYTES = 1024 * 1024
MAX_EXTENDED_HEADER_BYTES = 64 * 1024
EntryKind = Literal["file", "dir", "symlink", "hardlink", "special"]


class SourceError(CodedError):
    """A source checkout or archive was refused; nothing was left behind."""

    codes = {
        "source.unsupported_format": "The source is neither a directory nor a tar, tar.gz or zip archive.",
        "source.archive_invalid": "The archive is corrupt or truncated (bad header, CRC or compressed stream).",
        "source.archive_too_large": "The archive file is larger than the source byte limit allows.",
        "source.changed_during_read": "The source's bytes changed between the pre-scan and extraction or copy; read it again from a stable copy.",
        "source.unreadable": "A checkout file or directory could not be opened or read (permissions, or it vanished while being read).",
        "source.empty": "The source holds no files.",
        "source.absolute_path": "A member name is absolute; archives must hold relative paths only.",
        "source.path_traversal": "A member name contains a '..' or '.' component (path traversal).",
        "source.drive_letter": "A member name starts with a drive letter.",
        "source.invalid_path": "A member name holds a NUL, a backslash, a control character, an empty component or non-UTF-8 bytes.",
        "source.path_too_long": "A member name is longer or deeper than the limits allow.",
        "source.duplicate_member": "Two members have the same name.",
        "source.case_collision": "Two member names differ only by case or Unicode normalization.",
        "source.path_conflict": "A name is used both as a file and as a directory.",
        "source.link_member": "A member is a symbolic or hard link; only regular files and directories are accepted.",
        "source.special_member": "A member is a device, FIFO, socket, sparse or other special file.",
        "source.symlink_escape": "A checkout symlink points outside the checkout, at a directory, or nowhere.",
        "source.unsupported_member": "A zip entry is encrypted or uses an unsupported compression method.",
        "source.header_too_large": "A tar extended header (pax or GNU long name) is larger than allowed.",
        "source.overlapping_entries": "Zip entries share or overlap their bytes (a zip bomb construction).",
        "source.too_many_members": "The source holds more members than the limit allows.",
        "source.file_too_large": "A file is larger than the per-file byte limit.",
        "source.total_too_large": "The files together are larger than the total byte limit.",
        "source.compression_ratio": "Decompressed bytes exceed the allowed compression ratio (a decompression bomb).",
        "source.unsafe_member": "Python's tar 'data' filter refused a member the primary checks accepted; refused as a second layer.",
        "source.not_found": "A path was requested that is not part of the source snapshot.",
        "source.digest_drift": "A file's bytes no longer match the digest recorded when the source was read.",
    }


@dataclass(frozen=True)
class SourceLimits:
    """Caps on one source. Byte caps count bytes actually read, never sizes a header declares.

    The compression ratio is `decompressed / max(compressed, ratio_floor_bytes)`: small archives of
    very repetitive text are not bombs, so the ratio only bites above the floor.
    """

    max_members: int = 20_000
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
            raise fail("source.case_collision", f"members {shown(holder)} and {shown(path)} collide by case or normalization")
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
            raise fail("source.archive_invalid", f"the archive data is corrupt or truncated ({type(error).__name__})") from None
        if not data:
            return 0
        self.count += len(data)
        self._on_chunk(data)
        view[: len(data)] = data
        return len(data)


_DECODER_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError)


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
            raise fail("source.compression_ratio", f"decompressed bytes exceed {self._limits.max_compression_ratio}x the compressed bytes")


def read_chunks(reader: BinaryIO) -> Iterator[bytes]:
    while chunk := reader.read(CHUNK_BYTES):
        yield chunk


# ---------------------------------------------------------------------------------------------
# Formats. Each yields Entry values; `archive_sha256()` is final once iteration has finished.


def sniff_format(head: bytes) -> Literal["gzip", "zip", "tar"] | None:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


class _BoundedTarInfo(tarfile.TarInfo):
    """TarInfo that refuses oversized extended headers before tarfile reads them into memory."""

    _EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)

    def _proc_member(self, tarfile_):  # noqa: ANN001 - stdlib hook
        if self.type in self._EXTENDED and self.size > MAX_EXTENDED_HEADER_BYTES:
            raise fail("source.header_too_large", "a tar extended header exceeds 64 KiB")
        return super()._proc_member(tarfile_)


def _tar_kind(info: tarfile.TarInfo) -> EntryKind:
    if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE) and info.sparse is None:
        return "file"
    if info.type == tarfile.DIRTYPE:
        return "dir"
    if info.type == tarfile.SYMTYPE:
        return "symlink"
    if info.type == tarfile.LNKTYPE:
        return "hardlink"
    return "special"


class TarFormat:
    """A tar or gzip-compressed tar read strictly sequentially from an open file descriptor."""

    def __init__(self, handle: BinaryIO, limits: SourceLimits, *, compressed: bool, filter_root: str) -> None:
        self._handle = handle
        self._limits = limits
        self._compressed = compressed
        self._filter_root = filter_root
        self._hasher = None
        self._raw: MeteredReader | None = None

    def entries(self) -> Iterator[Entry]:
        self._handle.seek(0)
        self._hasher = hashlib.sha256()
        raw = MeteredReader(self._handle, self._on_raw)
        self._raw = raw
        stream: BinaryIO = raw  # type: ignore[assignment]
        if self._compressed:
            guard = RatioGuard(self._limits, lambda: raw.count)
            stream = MeteredReader(gzip.GzipFile(fileobj=raw, mode="rb"), lambda chunk: guard.add(len(chunk)))  # type: ignore[assignment]
        try:
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo, bufsize=CHUNK_BYTES) as archive:
                for info in archive:
                    kind = _tar_kind(info)
                    reader = archive.extractfile(info) if kind == "file" else None
                    metered = MeteredReader(reader, _ignore) if reader is not None else None
                    yield Entry(info.name, kind, info.size, metered)
                    if kind in ("file", "dir"):
                        self._second_layer(info)
        except SourceError:
            raise
        except (tarfile.TarError, EOFError, OSError, ValueError) as error:
            raise fail("source.archive_invalid", f"the tar stream is invalid ({type(error).__name__})") from None
        while raw.read(CHUNK_BYTES):
            pass

    def _second_layer(self, info: tarfile.TarInfo) -> None:
        try:
            tarfile.data_filter(info, self._filter_root)
        except tarfile.FilterError:
            raise fail("source.unsafe_member", f"member {shown(info.name)} was refused by the tar data filter") from None

    def _on_raw(self, chunk: bytes) -> None:
        self._hasher.update(chunk)  # type: ignore[union-attr]
        if self._raw is not None and self._raw.count > self._limits.max_archive_bytes:
            raise fail("source.archive_too_large", "the archive is larger than the source byte limit allows")

    def archive_sha256(self) -> str:
        return self._hasher.hexdigest()  # type: ignore[union-attr]


_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_ALLOWED_COMPRESSION = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def zip_declared_entries(handle: BinaryIO, size: int) -> tuple[int, int]:
    """(entry count, central directory size) from the end records, read before zipfile parses anything."""
    try:
        return _zip_end_records(handle, size)
    except struct.error:
        raise fail("source.archive_invalid", "the zip end records are truncated") from None


def _zip_end_records(handle: BinaryIO, size: int) -> tuple[int, int]:
    tail_length = min(size, _EOCD.size + 65535)
    handle.seek(size - tail_length)
    tail = handle.read(tail_length)
    position = tail.rfind(b"PK\x05\x06")
    while position >= 0 and not (
        position + _EOCD.size <= len(tail) and position + _EOCD.size + struct.unpack_from("<H", tail, position + 20)[0] == len(tail)
    ):
        position = tail.rfind(b"PK\x05\x06", 0, position)
    if position < 0:
        raise fail("source.archive_invalid", "the zip end-of-central-directory record is missing")
    _, _, _, _, entries, directory_size, _, _ = _EOCD.unpack_from(tail, position)
    if entries == 0xFFFF or directory_size == 0xFFFFFFFF:
        locator_at = size - tail_length + position - _ZIP64_LOCATOR.size
        if locator_at < 0:
            raise fail("source.archive_invalid", "the zip64 end record locator is missing")
        handle.seek(locator_at)
        signature, _, record_at, _ = _ZIP64_LOCATOR.unpack(handle.read(_ZIP64_LOCATOR.size))
        if signature != b"PK\x06\x07" or record_at + _ZIP64_EOCD.size > size:
            raise fail("source.archive_invalid", "the zip64 end record locator is invalid")
        handle.seek(record_at)
        record = _ZIP64_EOCD.unpack(handle.read(_ZIP64_EOCD.size))
        if record[0] != b"PK\x06\x06":
            raise fail("source.archive_invalid", "the zip64 end record is invalid")
        entries, directory_size = record[7], record[8]
    return entries, directory_size


def _zip_kind(info: zipfile.ZipInfo) -> EntryKind:
    mode = info.external_attr >> 16
    file_type = stat.S_IFMT(mode)
    if info.create_system == 3 and file_type:
        if stat.S_ISLNK(mode):
            return "symlink"
        if stat.S_ISDIR(mode):
            return "dir"
        if not stat.S_ISREG(mode):
            return "special"
    return "dir" if info.orig_filename.endswith("/") else "file"


class ZipFormat:
    """A zip archive, checked from its end records and local headers before any entry is inflated."""

    def __init__(self, handle: BinaryIO, limits: SourceLimits, size: int) -> None:
        self._handle = handle
        self._limits = limits
        self._size = size
        self._sha256 = ""

    def entries(self) -> Iterator[Entry]:
        entries, directory_size = zip_declared_entries(self._handle, self._size)
        if entries > self._limits.max_members:
            raise fail("source.too_many_members", f"the zip declares more than {self._limits.max_members} entries")
        if directory_size > entries * (46 + 3 * self._limits.max_path_bytes + 1024) + 1024:
            raise fail("source.archive_invalid", "the zip central directory is larger than its entries explain")
        self._handle.seek(0)
        try:
            archive = zipfile.ZipFile(self._handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
            raise fail("source.archive_invalid", "the zip central directory is invalid") from None
        with archive:
            infos = archive.infolist()
            if len(infos) > self._limits.max_members:
                raise fail("source.too_many_members", f"the zip holds more than {self._limits.max_members} entries")
            self._check_layout(infos, archive.start_dir)
            consumed = 0
            guard = RatioGuard(self._limits, lambda: consumed)
            for info in infos:
                kind = _zip_kind(info)
                if kind != "file":
                    yield Entry(info.orig_filename, kind, info.file_size)
                    continue
                if info.flag_bits & 0x1:
                    raise fail("source.unsupported_member", f"entry {shown(info.orig_filename)} is encrypted")
                if info.compress_type not in _ALLOWED_COMPRESSION:
                    raise fail("source.unsupported_member", f"entry {shown(info.orig_filename)} uses an unsupported compression method")
                consumed += info.compress_size
                try:
                    with archive.open(info) as inner:
                        yield Entry(info.orig_filename, "file", info.file_size, MeteredReader(inner, lambda chunk: guard.add(len(chunk))))
                except SourceError:
                    raise
                except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError):
                    raise fail("source.archive_invalid", f"entry {shown(info.orig_filename)} is corrupt") from None
        self._handle.seek(0)
        hasher = hashlib.sha256()
        for chunk in read_chunks(self._handle):
            hasher.update(chunk)
        self._sha256 = hasher.hexdigest()

    def _check_layout(self, infos: list[zipfile.ZipInfo], directory_start: int) -> None:
        """Every entry's local header + data must lie before the central directory, disjoint from all others."""
        spans = []
        for info in infos:
            self._handle.seek(info.header_offset)
            header = self._handle.read(_LOCAL_HEADER.size)
            if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
                raise fail("source.archive_invalid", f"entry {shown(info.orig_filename)} has no local header")
            fields = _LOCAL_HEADER.unpack(header)
            name_length, extra_length = fields[9], fields[10]
            end = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length + info.compress_size
            if info.flag_bits & 0x8:
                end += 12
            spans.append((info.header_offset, end, info.orig_filename))
        spans.sort()
        for (_, end, name), (following_start, _, _) in zip(spans, spans[1:] + [(directory_start, 0, "")]):
            if end > following_start:
                raise fail("source.overlapping_entries", f"entry {shown(name)} overlaps another entry or the central directory")

    def archive_sha256(self) -> str:
        return self._sha256


class CheckoutFormat:
    """A checkout directory walked without following directory symlinks; excluded names are skipped.

    A symlink to a regular file inside the checkout is read as that file's content; any other
    symlink (outside, to a directory, dangling) is refused.
    """

    def __init__(self, root: Path, exclude: frozenset[str]) -> None:
        self._root = Path(os.path.realpath(root))
        self._exclude = exclude
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
            raise fail("source.symlink_escape", f"symlink {shown(name)} points outside the checkout, at a directory, or nowhere")
        return target

    def archive_sha256(self) -> str:
        return ""


def _no_follow_opener(path: str, flags: int) -> int:
    descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise fail("source.special_member", "a checkout file changed into a special file while being read")
    return descriptor


def _ignore(_chunk: bytes) -> None:
    return None
