"""Hostile archives that used to get through the confined reader, each refused with its typed code.

Every case is generated here from raw bytes (struct, bz2/lzma/gzip, tarfile only to format single
headers) and read by `open_source` in a fresh subprocess, whose peak resident memory must stay under
256 MB: a refusal that first inflates the bomb is a failure even when its code is right. The child
runs under an address-space limit, so a removed guard fails the test instead of exhausting the
machine.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import struct
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest

PEAK_LIMIT_MB = 256
BOMB_MIB = 16

_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))
from dpone_dagster.release.source.snapshot import SourceError, SourceLimits, open_source
archive, work, limits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
code = None
try:
    open_source(archive, work_dir=work, limits=SourceLimits(**limits)).close()
except SourceError as error:
    code = error.code
except MemoryError:
    code = "MemoryError"
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (the pytest process,
# hundreds of MB late in a full run), while VmHWM belongs to this process's own address space.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "peak_mb": peak_kb / 1024}))
"""


def read_in_child(path: Path, tmp_path: Path, timeout: float = 120, **limits: int) -> tuple[str | None, float]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(work), json.dumps(limits)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(work.iterdir()) == [], "nothing may remain in the work directory after a refusal"
    return outcome["code"], outcome["peak_mb"]


def assert_refused(path: Path, tmp_path: Path, code: str, **limits: int) -> None:
    seen, peak = read_in_child(path, tmp_path, **limits)
    assert seen == code
    assert peak < PEAK_LIMIT_MB, f"peak RSS {peak:.0f} MB"


# ---------------------------------------------------------------------------------------------
# builders


def zeros(mib: int):
    block = bytes(1 << 20)
    for _ in range(mib):
        yield block


def zip_bytes(
    entries: list[dict], *, comment: bytes = b"", count: int | None = None, tail: bytes = b"", tail_gap: bytes = b""
) -> bytes:
    """A zip built from raw records. entry: name, data (already compressed), method, crc, size, flags,
    gap (bytes hidden before its local header); `tail_gap` hides bytes before the central directory."""
    body, central, offset = [], [], 0
    for entry in entries:
        body.append(entry.get("gap", b""))
        offset += len(entry.get("gap", b""))
        fields = (
            20,
            entry.get("flags", 0),
            entry.get("method", 0),
            0,
            0,
            entry.get("crc", 0),
            len(entry["data"]),
            entry["size"],
            len(entry["name"]),
            0,
        )
        local = struct.pack("<4s5H3L2H", b"PK\x03\x04", *fields) + entry["name"] + entry["data"]
        note = entry.get("comment", b"")
        central.append(
            struct.pack(
                "<4s6H3L5H2L", b"PK\x01\x02", 20, *fields[:8], len(entry["name"]), 0, len(note), 0, 0, 0, offset
            )
            + entry["name"]
            + note
        )
        body.append(local)
        offset += len(local)
    body.append(tail_gap)
    body, central = b"".join(body), b"".join(central)
    declared = len(entries) if count is None else count
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, declared, declared, len(central), len(body), len(comment) + len(tail)
    )
    return body + central + end + comment + tail


def stored(name: bytes, data: bytes, flags: int = 0) -> dict:
    return {"name": name, "data": data, "method": 0, "crc": zlib.crc32(data), "size": len(data), "flags": flags}


def header(name: str, typeflag: bytes, size: int, fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = typeflag, size
    return info.tobuf(format=fmt)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def pax_record(key: str, value: str) -> bytes:
    text = f" {key}={value}\n"
    length = len(text) + 1
    while len(str(length)) + len(text) != length:
        length += 1
    return f"{length}{text}".encode()


def tar_member(name: str, data: bytes) -> bytes:
    return header(name, tarfile.REGTYPE, len(data)) + padded(data)


END = bytes(1024)


# ---------------------------------------------------------------------------------------------
# zip: codecs, end records, names


@pytest.mark.parametrize("codec", ["bzip2", "lzma"])
def test_bzip2_and_lzma_entries_declared_small_are_refused_before_inflating(tmp_path: Path, codec: str) -> None:
    if codec == "bzip2":
        compressor, method = bz2.BZ2Compressor(9), 12
        data = b"".join(compressor.compress(block) for block in zeros(BOMB_MIB)) + compressor.flush()
    else:
        compressor = lzma.LZMACompressor(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1, "preset": 0}])
        raw = b"".join(compressor.compress(block) for block in zeros(BOMB_MIB)) + compressor.flush()
        properties = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1, "preset": 0})  # noqa: SLF001
        data, method = struct.pack("<BBH", 9, 4, len(properties)) + properties + raw, 14
    archive = tmp_path / f"{codec}.zip"
    archive.write_bytes(zip_bytes([{"name": b"bomb.sql", "data": data, "method": method, "crc": 0, "size": 10}]))
    assert_refused(archive, tmp_path, "source.unsupported_compression")


@pytest.mark.parametrize("held", [30_000, 6])
def test_central_directory_count_lie_is_refused(tmp_path: Path, held: int) -> None:
    """30,000 or 6 records behind a count of 5: only the declared count is ever read, and must use up the directory."""
    entries = [stored(f"f{i:05d}.sql".encode(), b"") for i in range(held)]
    archive = tmp_path / "lie.zip"
    archive.write_bytes(zip_bytes(entries, count=5))
    assert_refused(archive, tmp_path, "source.ambiguous_archive")


def test_second_end_record_is_refused(tmp_path: Path) -> None:
    entries = [stored(f"f{i:05d}.sql".encode(), b"") for i in range(30_000)]
    decoy = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, 46, 0, 0)
    archive = tmp_path / "two_ends.zip"
    archive.write_bytes(zip_bytes(entries, tail=decoy))
    assert_refused(archive, tmp_path, "source.ambiguous_archive")


def test_declared_sizes_over_the_total_are_refused_before_inflating(tmp_path: Path) -> None:
    deflated = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = b"".join(deflated.compress(block) for block in zeros(8)) + deflated.flush()
    entries = [{"name": f"f{i}.sql".encode(), "data": data, "method": 8, "crc": 0, "size": 8 << 20} for i in range(3)]
    archive = tmp_path / "declared.zip"
    archive.write_bytes(zip_bytes(entries))
    assert_refused(archive, tmp_path, "source.total_too_large", max_total_bytes=16 << 20, max_compression_ratio=10**6)


def test_deflate_entry_never_inflates_past_its_declared_size(tmp_path: Path) -> None:
    deflated = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = b"".join(deflated.compress(block) for block in zeros(BOMB_MIB)) + deflated.flush()
    archive = tmp_path / "liar.zip"
    archive.write_bytes(zip_bytes([{"name": b"a.sql", "data": data, "method": 8, "crc": 0, "size": 10}]))
    assert_refused(archive, tmp_path, "source.archive_invalid", max_compression_ratio=10**6)


def test_inflation_stops_at_the_declared_size_not_at_the_end_of_the_entry(tmp_path: Path) -> None:
    """The refusal comes within the first compressed chunk, not after inflating the whole entry."""
    from dpone_dagster.release.source.archive import SourceError, SourceLimits
    from dpone_dagster.release.source.zip import ZipFormat

    deflated = zlib.compressobj(1, zlib.DEFLATED, -15)
    data = b"".join(deflated.compress(os.urandom(1 << 16) * 16) for _ in range(16)) + deflated.flush()
    handle = io.BytesIO(zip_bytes([{"name": b"a.sql", "data": data, "method": 8, "crc": 0, "size": 10}]))
    entry = next(ZipFormat(handle, SourceLimits(max_compression_ratio=10**6), len(handle.getvalue())).entries())
    with pytest.raises(SourceError) as caught:
        while entry.reader.read(1 << 20):
            pass
    assert caught.value.code == "source.archive_invalid"
    assert handle.tell() <= 128 * 1024 < len(data)


@pytest.mark.parametrize(("name", "flags"), [("caf\u00e9.sql".encode("cp437"), 0), (b"caf\xe9.sql", 0x800)])
def test_zip_names_must_be_flagged_utf8_or_ascii(tmp_path: Path, name: bytes, flags: int) -> None:
    archive = tmp_path / "names.zip"
    archive.write_bytes(zip_bytes([stored(b"ok.sql", b"x"), stored(name, b"x", flags)]))
    assert_refused(archive, tmp_path, "source.invalid_path")


def test_flagged_utf8_zip_name_is_accepted(tmp_path: Path) -> None:
    archive = tmp_path / "utf8.zip"
    archive.write_bytes(zip_bytes([stored("caf\u00e9.sql".encode(), b"x", 0x800)]))
    assert read_in_child(archive, tmp_path)[0] is None


@pytest.mark.parametrize("where", ["before_first", "between", "before_directory"])
def test_bytes_hidden_outside_the_zip_entries_are_refused(tmp_path: Path, where: str) -> None:
    first, second = stored(b"a.sql", b"x"), stored(b"b.sql", b"y")
    if where == "before_first":
        first["gap"] = b"PK\x03\x04hidden"  # still sniffed as a zip
    elif where == "between":
        second["gap"] = b"hidden"
    archive = tmp_path / "gap.zip"
    archive.write_bytes(zip_bytes([first, second], tail_gap=b"hidden" if where == "before_directory" else b""))
    assert_refused(archive, tmp_path, "source.archive_invalid")


def test_zip_directory_entry_carrying_data_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "dir.zip"
    archive.write_bytes(zip_bytes([stored(b"a.sql", b"x"), stored(b"models/", b"hidden payload")]))
    assert_refused(archive, tmp_path, "source.archive_invalid")


def test_central_records_larger_than_their_count_explains_are_refused(tmp_path: Path) -> None:
    entries = [{**stored(f"f{i}.sql".encode(), b"x"), "comment": b"c" * 60_000} for i in range(5)]
    archive = tmp_path / "padded.zip"
    archive.write_bytes(zip_bytes(entries))
    assert_refused(archive, tmp_path, "source.ambiguous_archive")


def test_overlong_zip_name_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "long.zip"
    archive.write_bytes(zip_bytes([stored(b"n" * 2_000, b"x")]))
    assert_refused(archive, tmp_path, "source.path_too_long")


# ---------------------------------------------------------------------------------------------
# tar: headers


def gz(path: Path, parts) -> Path:
    with gzip.GzipFile(filename="", fileobj=open(path, "wb"), mode="wb", mtime=0) as out:  # noqa: SIM115
        for part in parts:
            out.write(part)
    return path


def test_repeated_pax_global_headers_are_refused(tmp_path: Path) -> None:
    record = pax_record("comment", "x" * 60_000)
    block = header("pax_global_header", tarfile.XGLTYPE, len(record)) + padded(record)
    archive = gz(tmp_path / "globals.tar.gz", [block] * 300 + [tar_member("a.sql", b"x"), END])
    assert archive.stat().st_size < 1_000_000
    assert_refused(archive, tmp_path, "source.global_header")


def test_one_git_archive_global_header_is_accepted(tmp_path: Path) -> None:
    record = pax_record("comment", "a" * 40)
    archive = tmp_path / "git.tar"
    archive.write_bytes(
        header("pax_global_header", tarfile.XGLTYPE, len(record)) + padded(record) + tar_member("a.sql", b"x") + END
    )
    assert read_in_child(archive, tmp_path)[0] is None


@pytest.mark.parametrize("style", ["old_gnu", "pax"])
def test_gnu_sparse_members_are_refused_from_their_header(tmp_path: Path, style: str) -> None:
    if style == "old_gnu":
        first = bytearray(header("sparse.sql", tarfile.GNUTYPE_SPARSE, 0, tarfile.GNU_FORMAT))
        first[482] = 1  # isextended: a chain of sparse map blocks follows
        first[148:156] = b"        "
        first[148:156] = b"%06o\x00 " % sum(first)
        extension = bytearray(512)
        extension[:12], extension[12:24], extension[504] = b"%011o\x00" % 0, b"%011o\x00" % 1, 1
        parts = [bytes(first)] + [bytes(extension)] * 20_000 + [END]
    else:
        record = (
            pax_record("GNU.sparse.major", "1")
            + pax_record("GNU.sparse.minor", "0")
            + pax_record("GNU.sparse.name", "s.sql")
        )
        map_lines = b"100000\n" + b"0\n1\n" * 100_000
        parts = [
            header("pax", tarfile.XHDTYPE, len(record)) + padded(record),
            header("s.sql", tarfile.REGTYPE, len(map_lines)),
            padded(map_lines),
            END,
        ]
    archive = gz(tmp_path / "sparse.tar.gz", parts)
    assert_refused(archive, tmp_path, "source.special_member")


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME])
def test_chained_extended_headers_are_refused(tmp_path: Path, kind: bytes) -> None:
    data = pax_record("path", "a.sql") if kind == tarfile.XHDTYPE else b"a.sql\x00"
    link = header("././@LongLink", kind, len(data), tarfile.GNU_FORMAT) + padded(data)
    archive = tmp_path / "chain.tar"
    archive.write_bytes(link * 3_000 + tar_member("a.sql", b"x") + END)
    assert_refused(archive, tmp_path, "source.header_chain")


def test_corrupt_header_mid_stream_is_refused_not_read_short(tmp_path: Path) -> None:
    second = bytearray(tar_member("b.sql", b"y"))
    second[0:5] = b"zzzzz"  # name changed, checksum not: a corrupt header
    archive = gz(
        tmp_path / "corrupt.tar.gz", [tar_member("a.sql", b"x"), bytes(second), tar_member("c.sql", b"z"), END]
    )
    assert_refused(archive, tmp_path, "source.archive_invalid")


@pytest.mark.parametrize("cut", ["member_boundary", "inside_gzip"])
def test_truncated_tar_is_refused(tmp_path: Path, cut: str) -> None:
    members = [tar_member("a.sql", b"x" * 700), tar_member("b.sql", os.urandom(3000))]
    if cut == "member_boundary":
        archive = gz(tmp_path / "cut.tar.gz", members)  # no end-of-archive marker
    else:
        archive = gz(tmp_path / "cut.tar.gz", [*members, END])
        archive.write_bytes(archive.read_bytes()[:-40])
    assert_refused(archive, tmp_path, "source.archive_invalid")


def test_data_after_the_end_marker_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "after.tar"
    archive.write_bytes(tar_member("a.sql", b"x") + END + tar_member("hidden.sql", b"y") + END)
    assert_refused(archive, tmp_path, "source.archive_invalid")


def test_decompressed_tar_stream_is_capped_as_a_whole(tmp_path: Path) -> None:
    archive = gz(tmp_path / "tail.tar.gz", [tar_member("a.sql", b"x"), END, *zeros(64)])
    limits = {"max_total_bytes": 1 << 20, "max_members": 10, "max_compression_ratio": 10**6}
    assert_refused(archive, tmp_path, "source.stream_too_large", **limits)


def test_non_utf8_gnu_long_name_is_refused(tmp_path: Path) -> None:
    data = b"caf\xe9.sql\x00"
    archive = tmp_path / "latin.tar"
    archive.write_bytes(
        header("././@LongLink", tarfile.GNUTYPE_LONGNAME, len(data), tarfile.GNU_FORMAT)
        + padded(data)
        + tar_member("x.sql", b"x")
        + END
    )
    assert_refused(archive, tmp_path, "source.invalid_path")


# ---------------------------------------------------------------------------------------------
# the source path itself


def test_fifo_source_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "source.tar"
    os.mkfifo(fifo)
    code, _ = read_in_child(fifo, tmp_path, timeout=10)  # an open() on the FIFO would block until the timeout
    assert code == "source.not_regular_file"


def test_symlink_to_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "source.tar").symlink_to(tmp_path / "pipe")
    assert read_in_child(tmp_path / "source.tar", tmp_path, timeout=10)[0] == "source.not_regular_file"
