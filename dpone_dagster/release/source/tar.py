"""A tar / tar.gz reader that parses every header itself, over a stream with a hard output bound.

Python's `tarfile` cannot be bounded from outside: it accumulates pax global headers without limit,
reads a GNU sparse map before anyone can refuse it, recurses once per chained extended header (a raw
`RecursionError` after a few thousand), and in stream mode treats a corrupt header after the first
as the end of the archive, so a truncated source reads short and is accepted. This parser reads
512-byte blocks and refuses instead:

- every header must carry the `ustar` magic and a correct checksum; a corrupt header anywhere, a
  stream that ends before the end-of-archive marker, or anything but zero bytes after it is
  `source.archive_invalid` (a tar is never read short);
- extended headers (pax `x`, GNU long name `L`, long link `K`) are at most 64 KiB each
  (`source.header_too_large`) and at most one of each kind may precede a member
  (`source.header_chain`); one pax global header (`git archive` writes one holding the commit) is
  accepted, holding only a comment or times (`source.global_header` otherwise);
- sparse members (type `S` or `GNU.sparse.*` pax keys) are refused from their header, before any
  map is read (`source.special_member`); names must decode as UTF-8 (`source.invalid_path`);
- the decompressed stream as a whole is capped (`source.stream_too_large`) and, for gzip, the ratio
  guard runs on every chunk; gzip itself decompresses with a bounded output per read.

The one thing a reader could get wrong: a member's data is only as long as its header says; the
entry reader returns exactly that many bytes, and the parser skips whatever the consumer left
unread (bounded by the same size) before it looks at the next header.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import struct
import tarfile
from collections.abc import Iterator
from typing import BinaryIO

from dpone_dagster.release.source.archive import (
    CHUNK_BYTES,
    MAX_EXTENDED_HEADER_BYTES,
    Entry,
    EntryKind,
    MeteredReader,
    RatioGuard,
    SourceError,
    SourceLimits,
    fail,
    shown,
)

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_FILE_TYPES = {b"0", b"\x00", b"7"}
_NO_DATA_TYPES = {b"1", b"2", b"3", b"4", b"5", b"6"}
_EXTENDED_TYPES = {b"x", b"L", b"K"}
_GLOBAL_KEYS = {"comment", "mtime", "atime", "ctime"}
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _invalid(message: str) -> SourceError:
    return fail("source.archive_invalid", message)


class _Stream:
    """Exact reads from the (decompressed) tar stream, counted against the archive output bound."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self.count = 0

    def read(self, size: int) -> bytes:
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            data = self._inner.read(min(wanted, CHUNK_BYTES))
            if not data:
                break
            self.count += len(data)
            if self.count > self._limit:
                raise fail(
                    "source.stream_too_large", "the decompressed tar stream is larger than the source byte limit allows"
                )
            parts.append(data)
            wanted -= len(data)
        return b"".join(parts)

    def exact(self, size: int, what: str) -> bytes:
        data = self.read(size)
        if len(data) != size:
            raise _invalid(f"the tar stream ends inside {what} (truncated archive)")
        return data

    def skip(self, size: int, what: str) -> None:
        while size > 0:
            size -= len(self.exact(min(size, CHUNK_BYTES), what))


class _MemberReader:
    """Exactly `size` bytes of one member's data; valid until the parser moves on."""

    def __init__(self, stream: _Stream, size: int) -> None:
        self._stream = stream
        self.left = size

    def read(self, size: int = -1) -> bytes:
        wanted = self.left if size < 0 else min(size, self.left)
        if wanted <= 0:
            return b""
        data = self._stream.exact(wanted, "a member's data")
        self.left -= len(data)
        return data


def _number(field: bytes, what: str) -> int:
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    if field[:1] and field[0] & 0x80:
        raise _invalid(f"the tar header's {what} is negative")
    text = field.split(b"\x00", 1)[0].strip(b" ")
    if not text:
        return 0
    if any(byte not in b"01234567" for byte in text):
        raise _invalid(f"the tar header's {what} is not an octal number")
    return int(text, 8)


def _text(field: bytes) -> bytes:
    return field.split(b"\x00", 1)[0]


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(
            "source.invalid_path", f"member name {shown(raw.decode('utf-8', 'backslashreplace'))} is not UTF-8"
        ) from None


def _check_header(header: bytes) -> None:
    if header[257:263] not in (b"ustar\x00", b"ustar "):
        raise _invalid("a tar header has no ustar magic (corrupt or not a POSIX/GNU tar)")
    stored = _number(header[148:156], "checksum")
    unsigned = sum(header[:148]) + 8 * 0x20 + sum(header[156:])
    signed = sum(struct.unpack("148b", header[:148])) + 8 * 0x20 + sum(struct.unpack("356b", header[156:]))
    if stored not in (unsigned, signed):
        raise _invalid("a tar header's checksum does not match (corrupt archive)")


def pax_records(data: bytes) -> dict[str, bytes]:
    """The `"<length> <key>=<value>\\n"` records of a pax header; anything malformed is refused."""
    records: dict[str, bytes] = {}
    position = 0
    while position < len(data):
        space = data.find(b" ", position, position + 20)
        digits = data[position:space] if space > position else b""
        if not digits or not digits.isdigit():
            raise _invalid("a pax header record has no valid length")
        end = position + int(digits)
        record = data[space + 1 : end]
        if end > len(data) or end <= space + 1 or not record.endswith(b"\n") or b"=" not in record:
            raise _invalid("a pax header record is malformed")
        key, value = record[:-1].split(b"=", 1)
        try:
            records[key.decode("utf-8")] = value
        except UnicodeDecodeError:
            raise _invalid("a pax header key is not UTF-8") from None
        position = end
    return records


def _tar_kind(typeflag: bytes) -> EntryKind:
    if typeflag in _FILE_TYPES:
        return "file"
    if typeflag == b"5":
        return "dir"
    if typeflag == b"2":
        return "symlink"
    if typeflag == b"1":
        return "hardlink"
    return "special"


class TarFormat:
    """A tar or gzip-compressed tar read strictly sequentially from an open file descriptor."""

    def __init__(self, handle: BinaryIO, limits: SourceLimits, *, compressed: bool, filter_root: str) -> None:
        self._handle = handle
        self._limits = limits
        self._compressed = compressed
        self._filter_root = filter_root
        self._hasher = hashlib.sha256()
        self._raw: MeteredReader | None = None
        self.declared_commit: str | None = None

    def entries(self) -> Iterator[Entry]:
        self._handle.seek(0)
        self._hasher = hashlib.sha256()
        self.declared_commit = None
        raw = MeteredReader(self._handle, self._on_raw)
        self._raw = raw
        inner: BinaryIO = raw  # type: ignore[assignment]
        if self._compressed:
            guard = RatioGuard(self._limits, lambda: raw.count)
            inner = MeteredReader(gzip.GzipFile(fileobj=raw, mode="rb"), lambda chunk: guard.add(len(chunk)))  # type: ignore[assignment]
        stream = _Stream(inner, self._limits.max_archive_bytes)
        yield from self._members(stream)
        while raw.read(CHUNK_BYTES):
            pass

    def _members(self, stream: _Stream) -> Iterator[Entry]:
        pending: dict[bytes, bytes] = {}
        globals_seen = 0
        while True:
            header = stream.read(BLOCK)
            if len(header) != BLOCK:
                raise _invalid("the tar stream ends without its end-of-archive marker (truncated archive)")
            if header == _ZERO_BLOCK:
                if pending:
                    raise _invalid("the tar stream ends after an extended header with no member")
                self._require_zero_tail(stream)
                return
            _check_header(header)
            typeflag = header[156:157]
            size = _number(header[124:136], "size")
            if typeflag == b"S":
                raise fail("source.special_member", "a tar member is a GNU sparse file")
            if typeflag in _EXTENDED_TYPES or typeflag == b"g":
                if size > MAX_EXTENDED_HEADER_BYTES:
                    raise fail("source.header_too_large", "a tar extended header exceeds 64 KiB")
                data = stream.exact(size, "an extended header")
                stream.skip(-size % BLOCK, "an extended header")
                if typeflag == b"g":
                    globals_seen += 1
                    self._global(data, globals_seen)
                    continue
                if typeflag in pending:
                    raise fail("source.header_chain", "a tar member is preceded by two extended headers of one kind")
                pending[typeflag] = data
                continue
            yield from self._member(stream, header, typeflag, size, pending)
            pending = {}

    def _member(
        self, stream: _Stream, header: bytes, typeflag: bytes, size: int, pending: dict[bytes, bytes]
    ) -> Iterator[Entry]:
        pax = pax_records(pending[b"x"]) if b"x" in pending else {}
        if any(key.startswith("GNU.sparse.") for key in pax):
            raise fail("source.special_member", "a tar member is a GNU sparse file (pax sparse map)")
        if pax.get("hdrcharset", b"") == b"BINARY":
            raise fail("source.invalid_path", "a pax header declares non-UTF-8 (BINARY) names")
        if b"L" in pending:
            name = _utf8(_text(pending[b"L"]))
        elif "path" in pax:
            name = _utf8(pax["path"])
        else:
            name = _utf8(_text(header[0:100]))
            prefix = _text(header[345:500])
            if header[257:263] == b"ustar\x00" and prefix:
                name = _utf8(prefix) + "/" + name
        if "size" in pax:
            digits = pax["size"]
            if not digits.isdigit() or len(digits) > 20:
                raise _invalid("a pax size is not a decimal number")
            size = int(digits)
        kind = _tar_kind(typeflag)
        data_size = 0 if typeflag in _NO_DATA_TYPES else size
        reader = _MemberReader(stream, data_size) if kind == "file" else None
        yield Entry(name, kind, data_size if kind == "file" else 0, reader)  # type: ignore[arg-type]
        if kind in ("file", "dir"):
            self._second_layer(name, typeflag, _number(header[100:108], "mode"), data_size)
        stream.skip(reader.left if reader is not None else data_size, "a member's data")
        stream.skip(-data_size % BLOCK, "a member's padding")

    def _global(self, data: bytes, seen: int) -> None:
        if seen > 1:
            raise fail("source.global_header", "the tar holds more than one pax global header")
        records = pax_records(data)
        unexpected = sorted(set(records) - _GLOBAL_KEYS)
        if unexpected:
            raise fail("source.global_header", f"the pax global header sets {shown(unexpected[0])}")
        comment = records.get("comment", b"").decode("ascii", "replace")
        self.declared_commit = comment if _COMMIT.match(comment) else None

    def _require_zero_tail(self, stream: _Stream) -> None:
        while chunk := stream.read(CHUNK_BYTES):
            if chunk.count(0) != len(chunk):
                raise _invalid("the tar stream holds data after its end-of-archive marker")

    def _second_layer(self, name: str, typeflag: bytes, mode: int, size: int) -> None:
        info = tarfile.TarInfo(name)
        info.type = tarfile.REGTYPE if typeflag in _FILE_TYPES else typeflag
        info.mode = mode
        info.size = size
        try:
            tarfile.data_filter(info, self._filter_root)
        except tarfile.FilterError:
            raise fail("source.unsafe_member", f"member {shown(name)} was refused by the tar data filter") from None

    def _on_raw(self, chunk: bytes) -> None:
        self._hasher.update(chunk)
        if self._raw is not None and self._raw.count > self._limits.max_archive_bytes:
            raise fail("source.archive_too_large", "the archive is larger than the source byte limit allows")

    def archive_sha256(self) -> str:
        return self._hasher.hexdigest()
