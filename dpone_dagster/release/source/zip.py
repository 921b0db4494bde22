"""A zip reader that parses the end record, central directory and local headers itself.

`zipfile` cannot be bounded from outside: it inflates bzip2 and LZMA entries with no output limit
(a 10-byte declared entry grows to gigabytes in memory), finds its own end record independently of
any pre-check (so a count lie or a second end record slips past one), and decodes non-UTF-8 names
as cp437. Here one interpretation serves both the pre-check and the read:

- exactly one end-of-central-directory record, ending the file (its comment may hold no other end
  or zip64 signature); no zip64 and no multi-disk archive; the declared entry count is capped
  before anything else is parsed, and the central directory must hold exactly that many records
  in exactly its declared size (`source.ambiguous_archive` otherwise);
- the local entries must tile the file from byte 0 up to the central directory with no gap and no
  overlap (`source.archive_invalid` / `source.overlapping_entries`, CVE-2024-0450), and every local
  header must agree with its central record;
- only stored and deflate entries are read (`source.unsupported_compression` for bzip2, LZMA and
  the rest; `source.unsupported_member` for encryption); a name must carry the UTF-8 flag (bit 11)
  or be ASCII (`source.invalid_path`);
- the declared sizes are capped before any entry is inflated, and each entry inflates in bounded
  steps that may never produce more than its declared size; its CRC and exact end are checked.

The one thing a reader could get wrong: the declared size is an upper bound enforced while
inflating, never trusted as the result; an entry is accepted only when it inflates to exactly that
size, ends exactly at its compressed size, and matches its CRC.
"""

from __future__ import annotations

import hashlib
import re
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from dpone_dagster.release.source.archive import (
    CHUNK_BYTES,
    Entry,
    EntryKind,
    RatioGuard,
    SourceError,
    SourceLimits,
    fail,
    read_chunks,
    shown,
)

_EOCD = struct.Struct("<4s4H2LH")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_LOCAL = struct.Struct("<4s5H3L2H")
_STORED, _DEFLATED = 0, 8
_SIGNATURES = (b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07")
_COMMIT = re.compile(rb"^[0-9a-f]{40}$")


def _invalid(message: str) -> SourceError:
    return fail("source.archive_invalid", message)


def _ambiguous(message: str) -> SourceError:
    return fail("source.ambiguous_archive", message)


@dataclass(frozen=True)
class EndRecord:
    entries: int
    directory_size: int
    directory_offset: int
    position: int
    comment: bytes


@dataclass(frozen=True)
class CentralEntry:
    name: str
    raw_name: bytes
    made_by: int
    flags: int
    method: int
    crc: int
    compressed: int
    size: int
    external: int
    offset: int


def read_end_record(handle: BinaryIO, size: int) -> EndRecord:
    """The one end-of-central-directory record, read before anything else (shared by every check)."""
    tail_length = min(size, _EOCD.size + 65535)
    handle.seek(size - tail_length)
    tail = handle.read(tail_length)
    candidates = []
    position = tail.find(b"PK\x05\x06")
    while position >= 0:
        if position + _EOCD.size <= len(tail):
            comment_length = struct.unpack_from("<H", tail, position + 20)[0]
            if position + _EOCD.size + comment_length == len(tail):
                candidates.append(position)
        position = tail.find(b"PK\x05\x06", position + 1)
    if not candidates:
        raise _invalid("the zip end-of-central-directory record is missing or does not end the file")
    if len(candidates) > 1:
        raise _ambiguous("the zip holds more than one end-of-central-directory record")
    at = candidates[0]
    _, disk, directory_disk, disk_entries, entries, directory_size, directory_offset, _ = _EOCD.unpack_from(tail, at)
    comment = tail[at + _EOCD.size :]
    absolute = size - tail_length + at
    if any(signature in comment for signature in _SIGNATURES) or b"PK\x06\x07" in tail[max(0, at - 20) : at]:
        raise _ambiguous(
            "the zip comment or the bytes before the end record hold another end record (zip64 or a second archive)"
        )
    if entries == 0xFFFF or directory_size == 0xFFFFFFFF or directory_offset == 0xFFFFFFFF:
        raise fail(
            "source.unsupported_format", "zip64 archives are not accepted (a source fits the classic zip limits)"
        )
    if disk or directory_disk or disk_entries != entries:
        raise _ambiguous("the zip end record declares several disks or two different entry counts")
    if directory_offset + directory_size != absolute:
        raise _ambiguous("the zip central directory does not end where the end record begins")
    return EndRecord(entries, directory_size, directory_offset, absolute, comment)


def _decode_name(raw: bytes, flags: int) -> str:
    try:
        return raw.decode("utf-8") if flags & 0x800 else raw.decode("ascii")
    except UnicodeDecodeError:
        shown_name = shown(raw.decode("utf-8", "backslashreplace"))
        raise fail("source.invalid_path", f"zip entry name {shown_name} is neither flagged UTF-8 nor ASCII") from None


def read_central_directory(handle: BinaryIO, end: EndRecord, limits: SourceLimits) -> list[CentralEntry]:
    """Exactly `end.entries` records in exactly `end.directory_size` bytes, each parsed strictly."""
    if end.entries > limits.max_members:
        raise fail("source.too_many_members", f"the zip declares more than {limits.max_members} entries")
    if end.directory_size > end.entries * (_CENTRAL.size + 3 * limits.max_path_bytes + 1024) + 1024:
        raise _ambiguous("the zip central directory is larger than the entry count of its end record explains")
    handle.seek(end.directory_offset)
    consumed = 0
    result = []
    for _ in range(end.entries):
        fixed = handle.read(_CENTRAL.size)
        if len(fixed) != _CENTRAL.size or fixed[:4] != b"PK\x01\x02":
            raise _ambiguous("the zip central directory holds fewer records than its end record declares")
        fields = _CENTRAL.unpack(fixed)
        name_length, extra_length, comment_length, disk = fields[10], fields[11], fields[12], fields[13]
        consumed += _CENTRAL.size + name_length + extra_length + comment_length
        if consumed > end.directory_size:
            raise _ambiguous("the zip central directory records run past its declared size")
        raw_name = handle.read(name_length)
        handle.seek(extra_length + comment_length, 1)
        compressed, size, offset = fields[8], fields[9], fields[16]
        if 0xFFFFFFFF in (compressed, size, offset) or disk:
            raise fail("source.unsupported_format", "zip64 or multi-disk entries are not accepted")
        name = _decode_name(raw_name, fields[3])
        result.append(
            CentralEntry(
                name, raw_name, fields[1], fields[3], fields[4], fields[7], compressed, size, fields[15], offset
            )
        )
    if consumed != end.directory_size:
        raise _ambiguous("the zip central directory holds more records than its end record declares")
    return result


def _zip_kind(entry: CentralEntry) -> EntryKind:
    mode = entry.external >> 16
    if entry.made_by >> 8 == 3 and stat.S_IFMT(mode):
        if stat.S_ISLNK(mode):
            return "symlink"
        if stat.S_ISDIR(mode):
            return "dir"
        if not stat.S_ISREG(mode):
            return "special"
    return "dir" if entry.name.endswith("/") else "file"


class ZipFormat:
    """A zip archive, checked from its end record, central directory and local headers before any inflation."""

    def __init__(self, handle: BinaryIO, limits: SourceLimits, size: int) -> None:
        self._handle = handle
        self._limits = limits
        self._size = size
        self._sha256 = ""
        self.declared_commit: str | None = None

    def entries(self) -> Iterator[Entry]:
        end = read_end_record(self._handle, self._size)
        central = read_central_directory(self._handle, end, self._limits)
        self.declared_commit = end.comment.decode("ascii") if _COMMIT.match(end.comment) else None
        starts = self._check_layout(central, end.directory_offset)
        declared = 0
        for entry in central:
            if _zip_kind(entry) == "file":
                if entry.flags & 0x41:
                    raise fail("source.unsupported_member", f"entry {shown(entry.name)} is encrypted")
                if entry.method not in (_STORED, _DEFLATED):
                    raise fail(
                        "source.unsupported_compression", f"entry {shown(entry.name)} is neither stored nor deflated"
                    )
                declared += entry.size
        if declared > self._limits.max_total_bytes:
            raise fail("source.total_too_large", f"the zip declares more than {self._limits.max_total_bytes} bytes")
        consumed = [0]
        guard = RatioGuard(self._limits, lambda: consumed[0])
        for entry, start in zip(central, starts):
            kind = _zip_kind(entry)
            if kind == "dir" and (entry.size or entry.compressed > 2):
                raise _invalid(f"directory entry {shown(entry.name)} carries data")
            if kind != "file":
                yield Entry(entry.name, kind, entry.size)
                continue
            yield Entry(entry.name, "file", entry.size, _EntryReader(self._handle, entry, start, guard, consumed))  # type: ignore[arg-type]
        self._handle.seek(0)
        hasher = hashlib.sha256()
        for chunk in read_chunks(self._handle):
            hasher.update(chunk)
        self._sha256 = hasher.hexdigest()

    def _check_layout(self, central: list[CentralEntry], directory_start: int) -> list[int]:
        """Local entries tile [0, central directory) exactly; returns each entry's data offset.

        Spans are checked for overlap before any local header is compared with its central record,
        so the overlap construction is reported as such.
        """
        spans = []
        locals_ = []
        for entry in central:
            self._handle.seek(entry.offset)
            header = self._handle.read(_LOCAL.size)
            if len(header) != _LOCAL.size or header[:4] != b"PK\x03\x04":
                raise _invalid(f"entry {shown(entry.name)} has no local header")
            fields = _LOCAL.unpack(header)
            data_start = entry.offset + _LOCAL.size + fields[9] + fields[10]
            end = data_start + entry.compressed
            if fields[2] & 0x8:
                end += self._descriptor_length(entry, end)
            spans.append((entry.offset, end, entry.name))
            locals_.append((fields, data_start))
        position = 0
        for start, end, name in sorted(spans):
            if start < position:
                raise fail("source.overlapping_entries", f"entry {shown(name)} overlaps another entry")
            if start > position:
                raise _invalid("the zip holds bytes between its entries that no entry accounts for")
            position = end
        if position > directory_start:
            raise fail("source.overlapping_entries", "a zip entry overlaps the central directory")
        if position < directory_start:
            raise _invalid("the zip holds bytes before its central directory that no entry accounts for")
        for entry, (fields, _) in zip(central, locals_):
            _, _, flags, method, _, _, crc, compressed, size, name_length, _ = fields
            self._handle.seek(entry.offset + _LOCAL.size)
            if (
                self._handle.read(name_length) != entry.raw_name
                or method != entry.method
                or (flags ^ entry.flags) & 0x849
            ):
                raise _invalid(
                    f"entry {shown(entry.name)} has a local header that disagrees with the central directory"
                )
            if not flags & 0x8 and (crc, compressed, size) != (entry.crc, entry.compressed, entry.size):
                raise _invalid(f"entry {shown(entry.name)} declares other sizes or CRC locally")
        return [data_start for _, data_start in locals_]

    def _descriptor_length(self, entry: CentralEntry, at: int) -> int:
        self._handle.seek(at)
        data = self._handle.read(16)
        signed = data[:4] == b"PK\x07\x08"
        body = data[4:16] if signed else data[:12]
        if len(body) != 12 or struct.unpack("<3L", body) != (entry.crc, entry.compressed, entry.size):
            raise _invalid(f"entry {shown(entry.name)} has a data descriptor that disagrees with the central directory")
        return 16 if signed else 12

    def archive_sha256(self) -> str:
        return self._sha256


class _EntryReader:
    """One entry's bytes, inflated in bounded steps; never more than the declared size."""

    def __init__(
        self, handle: BinaryIO, entry: CentralEntry, start: int, guard: RatioGuard, consumed: list[int]
    ) -> None:
        self._handle = handle
        self._entry = entry
        self._position = start
        self._left = entry.compressed
        self._produced = 0
        self._crc = 0
        self._guard = guard
        self._consumed = consumed
        self._inflater = zlib.decompressobj(-15) if entry.method == _DEFLATED else None
        self._done = False

    def read(self, size: int = -1) -> bytes:
        size = CHUNK_BYTES if size < 0 else min(size, CHUNK_BYTES)
        while not self._done and size > 0:
            data = self._step(size)
            if data:
                return data
        return b""

    def _input(self, size: int) -> bytes:
        if not self._left:
            return b""
        self._handle.seek(self._position)
        data = self._handle.read(min(size, self._left))
        if not data:
            raise _invalid(f"entry {shown(self._entry.name)} is truncated")
        self._position += len(data)
        self._left -= len(data)
        self._consumed[0] += len(data)
        return data

    def _step(self, size: int) -> bytes:
        if self._inflater is None:
            output = self._input(size)
            finished = not self._left
        else:
            tail = self._inflater.unconsumed_tail
            data = tail if tail else self._input(64 * 1024)
            try:
                output = self._inflater.decompress(data, size)
            except zlib.error:
                raise _invalid(f"entry {shown(self._entry.name)} holds a corrupt deflate stream") from None
            if self._inflater.eof:
                if self._left or self._inflater.unused_data:
                    raise _invalid(f"entry {shown(self._entry.name)} ends before its declared compressed size")
                finished = True
            elif not output and not data:
                raise _invalid(f"entry {shown(self._entry.name)} is truncated (deflate stream incomplete)")
            else:
                finished = False
        self._produced += len(output)
        if self._produced > self._entry.size:
            raise _invalid(f"entry {shown(self._entry.name)} inflates past its declared size")
        self._guard.add(len(output))
        self._crc = zlib.crc32(output, self._crc)
        if finished:
            self._done = True
            if self._produced != self._entry.size or self._crc != self._entry.crc:
                raise _invalid(f"entry {shown(self._entry.name)} does not match its declared size or CRC")
        return output
