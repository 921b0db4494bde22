"""Confined source reading: round trips, determinism, and refusal of hostile tar/zip/checkout input.

Every refusal test asserts the stable code *and* that the work directory is left empty: nothing is
written before the pre-scan has accepted every member, and a failure during extraction removes the
private copy.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from devtools.source_builder import build_source_archive
from dpone_dagster.release.source import snapshot as source_module
from dpone_dagster.release.source.archive import CheckoutFormat, SourceError, SourceLimits
from dpone_dagster.release.source.snapshot import SNAPSHOT_KIND, open_source

SMALL = SourceLimits(
    max_members=20, max_file_bytes=4096, max_total_bytes=16384, max_compression_ratio=10, ratio_floor_bytes=1024
)


# ---------------------------------------------------------------------------------------------
# helpers


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def make_tar(path: Path, members: list[tuple], *, gz: bool = False, pax: dict | None = None) -> Path:
    """members: (name, "file", bytes) | (name, "dir") | (name, "symlink"|"hardlink", target) | (name, "char"|"fifo")."""
    with tarfile.open(path, "w:gz" if gz else "w", format=tarfile.PAX_FORMAT, pax_headers=pax or {}) as archive:
        for member in members:
            name, kind = member[0], member[1]
            info = tarfile.TarInfo(name)
            data = None
            if kind == "file":
                data = member[2]
                info.size = len(data)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("symlink", "hardlink"):
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = member[2]
            elif kind == "char":
                info.type = tarfile.CHRTYPE
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def make_zip(path: Path, members: list[tuple[str, bytes]], *, symlink: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return path


def raw_zip(entries: list[dict]) -> bytes:
    """A zip built byte by byte so headers can lie. entry: name, data, method, crc, size, flags, offset, attr."""
    import struct
    import zlib

    body = b""
    central = b""
    offsets = []
    for entry in entries:
        name = entry["name"]
        if "offset" in entry:
            offsets.append(entry["offset"])
            continue
        offsets.append(len(body))
        data = entry["data"]
        stored = zlib.compress(data)[2:-4] if entry.get("method", 8) == 8 else data
        entry["_stored"] = stored
        body += (
            struct.pack(
                "<4s5H3L2H",
                b"PK\x03\x04",
                20,
                entry.get("flags", 0),
                entry.get("method", 8),
                0,
                0,
                entry.get("crc", zlib.crc32(data)),
                len(stored),
                entry.get("size", len(data)),
                len(name),
                0,
            )
            + name
            + stored
        )
    for entry, offset in zip(entries, offsets):
        source = entry if "_stored" in entry else next(e for e in entries if "_stored" in e)
        data = source["data"]
        central += (
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                (3 << 8) | 20,
                20,
                entry.get("flags", 0),
                entry.get("method", 8),
                0,
                0,
                entry.get("crc", zlib.crc32(data)),
                len(source["_stored"]),
                entry.get("size", len(data)),
                len(entry["name"]),
                0,
                0,
                0,
                0,
                entry.get("attr", (stat.S_IFREG | 0o644) << 16),
                offset,
            )
            + entry["name"]
        )
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(body), 0)
    return body + central + end


def refused(path: Path, work: Path, code: str, limits: SourceLimits = SourceLimits()) -> SourceError:
    work.mkdir(exist_ok=True)
    with pytest.raises(SourceError) as caught:
        open_source(path, work_dir=work, limits=limits)
    assert caught.value.code == code, caught.value
    assert list(work.iterdir()) == [], "nothing may remain in the work directory after a refusal"
    return caught.value


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "checkout",
        {
            "dbt_project.yml": b"name: synthetic\n",
            "models/orders.sql": b"select 1 as id\n",
            "flows/a/flow.yaml": b"schema: x\n",
            "flows/a/sql/01.sql": b"select 2\n",
            "target/manifest.json": b"{}",
            ".git/HEAD": b"ref: refs/heads/main\n",
        },
    )


# ---------------------------------------------------------------------------------------------
# round trips and determinism


def test_checkout_tar_and_zip_give_one_snapshot(checkout: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    built = build_source_archive(checkout, tmp_path / "source.tar.gz")
    zipped = make_zip(
        tmp_path / "source.zip", [(f.path, (checkout / f.path).read_bytes()) for f in built.snapshot.files]
    )
    plain = make_tar(
        tmp_path / "source.tar", [(f.path, "file", (checkout / f.path).read_bytes()) for f in built.snapshot.files]
    )
    trees = [open_source(p, work_dir=work) for p in (checkout, tmp_path / "source.tar.gz", zipped, plain)]
    try:
        digests = {tree.snapshot.digest for tree in trees}
        assert len(digests) == 1
        assert [f.path for f in trees[0].snapshot.files] == [
            "dbt_project.yml",
            "flows/a/flow.yaml",
            "flows/a/sql/01.sql",
            "models/orders.sql",
        ]
        assert trees[1].archive_sha256 == built.sha256
        assert trees[0].archive_sha256 is None
        for tree in trees:
            assert stat.S_IMODE(tree.root.stat().st_mode) == 0o700
            assert stat.S_IMODE((tree.root / "flows/a/sql/01.sql").stat().st_mode) == 0o600
            assert tree.read_bytes("models/orders.sql") == b"select 1 as id\n"
            assert tree.root.parent == work
    finally:
        for tree in trees:
            tree.close()
    assert list(work.iterdir()) == []


def test_snapshot_digest_is_domain_separated_over_sorted_pairs(checkout: Path, tmp_path: Path) -> None:
    with open_source(checkout, work_dir=tmp_path) as tree:
        pairs = [[f.path, hashlib.sha256((checkout / f.path).read_bytes()).hexdigest()] for f in tree.snapshot.files]
        body = ("[" + ",".join(f'["{p}","{h}"]' for p, h in pairs) + "]").encode()
        expected = "sha256:" + hashlib.sha256(b"dpone:" + SNAPSHOT_KIND.encode() + b"\x00" + body).hexdigest()
        assert tree.snapshot.digest == expected
    one = source_module.SourceSnapshot((source_module.SourceFile("a", "0" * 64, 1),))
    # Golden vector: persisted in releases, must never change.
    assert (
        one.digest
        == "sha256:" + hashlib.sha256(b'dpone:dpone.source-snapshot.v1\x00[["a","' + b"0" * 64 + b'"]]').hexdigest()
    )


def test_builder_is_deterministic_and_content_sensitive(tmp_path: Path) -> None:
    files = {f"dir{i % 3}/file{i}.sql": f"select {i}\n".encode() for i in range(12)}
    first = write_tree(tmp_path / "one", files)
    second = write_tree(tmp_path / "two", dict(reversed(list(files.items()))))
    os.utime(second / "dir0/file0.sql", (1, 1))
    os.chmod(second / "dir1/file1.sql", 0o600)
    a = build_source_archive(first, tmp_path / "a.tar.gz")
    b = build_source_archive(second, tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert a.sha256 == b.sha256 and a.snapshot == b.snapshot
    (second / "dir2/file2.sql").write_bytes(b"select 'changed'\n")
    c = build_source_archive(second, tmp_path / "c.tar.gz")
    assert c.sha256 != a.sha256 and c.snapshot.digest != a.snapshot.digest
    with tarfile.open(tmp_path / "a.tar.gz") as archive:
        members = archive.getmembers()
    assert [m.name for m in members] == sorted(files)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, 0, "", "", 0o644)}


def test_checkout_excludes_build_output_and_git(checkout: Path, tmp_path: Path) -> None:
    (checkout / "models" / ".user.yml").write_text("id: 1\n")  # dbt's per-user id file, written at its first run
    with open_source(checkout, work_dir=tmp_path) as tree:
        paths = [f.path for f in tree.snapshot.files]
    assert not any(p.startswith((".git/", "target/")) or p.endswith(".user.yml") for p in paths)
    with open_source(checkout, work_dir=tmp_path, exclude=frozenset()) as tree:
        assert tree.snapshot.get("target/manifest.json") is not None


def test_leading_dot_slash_is_accepted_and_normalized(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "s.tar", [("./", "dir"), ("./a", "dir"), ("./a/x.sql", "file", b"select 1")])
    with open_source(archive, work_dir=tmp_path) as tree:
        assert [f.path for f in tree.snapshot.files] == ["a/x.sql"]


# ---------------------------------------------------------------------------------------------
# hostile names and member types (tar)

GOOD = ("ok/first.sql", "file", b"select 1")


@pytest.mark.parametrize(
    ("member", "code"),
    [
        (("/etc/cron.d/x", "file", b"x"), "source.absolute_path"),
        (("../escape.sql", "file", b"x"), "source.path_traversal"),
        (("ok/../../escape.sql", "file", b"x"), "source.path_traversal"),
        (("ok/./x.sql", "file", b"x"), "source.path_traversal"),
        (("ok\\..\\x.sql", "file", b"x"), "source.invalid_path"),
        (("C:/windows/x.sql", "file", b"x"), "source.drive_letter"),
        (("c:x.sql", "file", b"x"), "source.drive_letter"),
        (("ok/new\nline.sql", "file", b"x"), "source.invalid_path"),
        (("ok//double.sql", "file", b"x"), "source.invalid_path"),
        (("ok/" + "d/" * 40 + "x.sql", "file", b"x"), "source.path_too_long"),
        (("ok/" + "x" * 300, "file", b"x"), "source.path_too_long"),
        (("ok/link.sql", "symlink", "../../etc/passwd"), "source.link_member"),
        (("ok/link.sql", "symlink", "first.sql"), "source.link_member"),
        (("ok/hard.sql", "hardlink", "ok/first.sql"), "source.link_member"),
        (("ok/dev", "char"), "source.special_member"),
        (("ok/fifo", "fifo"), "source.special_member"),
        (("ok/first.sql", "file", b"again"), "source.duplicate_member"),
        (("OK/First.sql", "file", b"x"), "source.case_collision"),
        (("ok/FIRST.SQL", "file", b"x"), "source.case_collision"),
        (("ok/first.sql/inner.sql", "file", b"x"), "source.path_conflict"),
        (("ok/first.sql", "dir"), "source.path_conflict"),
    ],
)
def test_tar_member_refused_before_anything_is_written(tmp_path: Path, member: tuple, code: str) -> None:
    archive = make_tar(tmp_path / "s.tar", [GOOD, member, ("ok/last.sql", "file", b"x")])
    refused(archive, tmp_path / "work", code)


def test_unicode_normalization_collision_is_refused(tmp_path: Path) -> None:
    composed, decomposed = "caf\u00e9.sql", "cafe\u0301.sql"
    archive = make_tar(tmp_path / "s.tar", [(composed, "file", b"1"), (decomposed, "file", b"2")])
    refused(archive, tmp_path / "work", "source.case_collision")


def test_non_utf8_tar_name_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT, encoding="latin-1") as archive:
        info = tarfile.TarInfo("caf\u00e9.sql")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    (tmp_path / "s.tar").write_bytes(buffer.getvalue())
    refused(tmp_path / "s.tar", tmp_path / "work", "source.invalid_path")


def test_pax_path_with_nul_is_refused(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "p.tar", "w", format=tarfile.PAX_FORMAT) as out:
        info = tarfile.TarInfo("placeholder.sql")
        info.size = 1
        info.pax_headers = {"path": "ok/evil\x00.sql"}
        out.addfile(info, io.BytesIO(b"x"))
    refused(tmp_path / "p.tar", tmp_path / "work", "source.invalid_path")


def test_oversized_pax_header_is_refused_before_it_is_read(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "s.tar", [GOOD], pax={"comment": "x" * 100_000})
    refused(archive, tmp_path / "work", "source.header_too_large")


def test_tar_data_filter_is_a_second_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = make_tar(tmp_path / "s.tar", [("../outside.sql", "file", b"x")])
    monkeypatch.setattr(source_module, "check_member_name", lambda raw, **_: raw)
    refused(archive, tmp_path / "work", "source.unsafe_member")
    assert not (tmp_path / "outside.sql").exists()


# ---------------------------------------------------------------------------------------------
# caps on bytes actually read


def test_member_count_cap(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "s.tar", [(f"f{i}.sql", "file", b"x") for i in range(21)])
    refused(archive, tmp_path / "work", "source.too_many_members", SMALL)


def test_per_file_and_total_caps(tmp_path: Path) -> None:
    big = make_tar(tmp_path / "big.tar", [("big.sql", "file", b"x" * 4097)])
    refused(big, tmp_path / "w1", "source.file_too_large", SMALL)
    many = make_tar(tmp_path / "many.tar", [(f"f{i}.sql", "file", os.urandom(4000)) for i in range(5)])
    refused(many, tmp_path / "w2", "source.total_too_large", SMALL)


def test_gzip_bomb_is_stopped_by_the_ratio_of_bytes_read(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "bomb.tar.gz", [("zeros.sql", "file", b"\0" * 200_000)], gz=True)
    limits = SourceLimits(max_compression_ratio=10, ratio_floor_bytes=1024)
    refused(archive, tmp_path / "work", "source.compression_ratio", limits)


def test_zip_bomb_is_stopped_by_the_ratio_of_bytes_read(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "bomb.zip", [("zeros.sql", b"\0" * 200_000)])
    limits = SourceLimits(max_compression_ratio=10, ratio_floor_bytes=1024)
    refused(archive, tmp_path / "work", "source.compression_ratio", limits)


def test_zip_overlapping_entries_are_refused(tmp_path: Path) -> None:
    data = b"select 1\n" * 100
    archive = tmp_path / "overlap.zip"
    archive.write_bytes(raw_zip([{"name": b"a.sql", "data": data}, {"name": b"b.sql", "data": data, "offset": 0}]))
    refused(archive, tmp_path / "work", "source.overlapping_entries")


def test_zip_header_lying_about_size_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "liar.zip"
    archive.write_bytes(raw_zip([{"name": b"a.sql", "data": b"\0" * 100_000, "size": 10}]))
    refused(archive, tmp_path / "work", "source.archive_invalid")


def test_zip_symlink_encrypted_and_nul_names_are_refused(tmp_path: Path) -> None:
    refused(make_zip(tmp_path / "l.zip", [("a.sql", b"x")], symlink="b.sql"), tmp_path / "w1", "source.link_member")
    encrypted = tmp_path / "e.zip"
    encrypted.write_bytes(raw_zip([{"name": b"a.sql", "data": b"x", "flags": 1}]))
    refused(encrypted, tmp_path / "w2", "source.unsupported_member")
    nul = tmp_path / "n.zip"
    nul.write_bytes(raw_zip([{"name": b"a.sql\x00../../x", "data": b"x"}]))
    refused(nul, tmp_path / "w3", "source.invalid_path")
    slip = make_zip(tmp_path / "slip.zip", [("ok.sql", b"x"), ("../../slip.sql", b"x")])
    refused(slip, tmp_path / "w4", "source.path_traversal")


def test_zip_declaring_too_many_entries_is_refused_from_its_end_record(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "many.zip", [(f"f{i}.sql", b"x") for i in range(25)])
    refused(archive, tmp_path / "work", "source.too_many_members", SMALL)


@pytest.mark.parametrize("mutate", ["truncate", "garbage"])
def test_corrupt_archives_are_refused(tmp_path: Path, mutate: str) -> None:
    archive = make_tar(tmp_path / "s.tar.gz", [("a.sql", "file", os.urandom(3000))], gz=True)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2] if mutate == "truncate" else data[:40] + b"\xff" * 40 + data[80:])
    refused(archive, tmp_path / "work", "source.archive_invalid")


def test_unknown_format_and_empty_archive(tmp_path: Path) -> None:
    (tmp_path / "x.bin").write_bytes(b"not an archive at all" * 40)
    refused(tmp_path / "x.bin", tmp_path / "w1", "source.unsupported_format")
    refused(make_tar(tmp_path / "empty.tar", [("only_dir", "dir")]), tmp_path / "w2", "source.empty")


# ---------------------------------------------------------------------------------------------
# checkouts


def test_checkout_symlinks(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {"a.sql": b"select 1", "sub/b.sql": b"select 2"})
    (tmp_path / "outside.sql").write_bytes(b"secret")
    (root / "inside_link.sql").symlink_to("a.sql")
    with open_source(root, work_dir=tmp_path) as tree:
        assert tree.read_bytes("inside_link.sql") == b"select 1"
    (root / "escape.sql").symlink_to(tmp_path / "outside.sql")
    refused(root, tmp_path / "w1", "source.symlink_escape")
    (root / "escape.sql").unlink()
    (root / "dir_link").symlink_to("sub")
    refused(root, tmp_path / "w2", "source.symlink_escape")
    (root / "dir_link").unlink()
    (root / "dangling.sql").symlink_to("missing.sql")
    refused(root, tmp_path / "w3", "source.symlink_escape")


def test_checkout_special_files_and_hostile_names(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {"a.sql": b"select 1"})
    os.mkfifo(root / "pipe")
    refused(root, tmp_path / "w1", "source.special_member")
    (root / "pipe").unlink()
    (root / "back\\slash.sql").write_bytes(b"x")
    refused(root, tmp_path / "w2", "source.invalid_path")
    (root / "back\\slash.sql").unlink()
    (root / "A.sql").write_bytes(b"x")
    refused(root, tmp_path / "w3", "source.case_collision")


def test_change_between_scan_and_copy_is_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "c", {"a.sql": b"select 1", "b.sql": b"select 2"})

    class Mutating(CheckoutFormat):
        passes = 0

        def entries(self):
            Mutating.passes += 1
            if Mutating.passes == 2:
                (root / "b.sql").write_bytes(b"select 3")
            yield from super().entries()

    monkeypatch.setattr(source_module, "CheckoutFormat", Mutating)
    refused(root, tmp_path / "work", "source.changed_during_read")


def test_reads_are_reverified_against_the_snapshot(checkout: Path, tmp_path: Path) -> None:
    with open_source(checkout, work_dir=tmp_path) as tree:
        with pytest.raises(SourceError) as missing:
            tree.read_bytes("not/there.sql")
        assert missing.value.code == "source.not_found"
        (tree.root / "models/orders.sql").write_bytes(b"select 'tampered'\n")
        with pytest.raises(SourceError) as drift:
            tree.read_bytes("models/orders.sql")
        assert drift.value.code == "source.digest_drift"
        (tree.root / "dbt_project.yml").unlink()
        (tree.root / "dbt_project.yml").symlink_to(checkout / "dbt_project.yml")
        with pytest.raises(SourceError) as linked:
            tree.read_bytes("dbt_project.yml")
        assert linked.value.code == "source.digest_drift"


def test_messages_never_carry_the_private_or_archive_path(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "secret-location.tar", [("../x.sql", "file", b"x")])
    error = refused(archive, tmp_path / "work", "source.path_traversal")
    assert str(tmp_path) not in str(error) and "secret-location" not in str(error)


# ---------------------------------------------------------------------------------------------
# the default member cap: the policy's maximum workloads at a realistic size, still bounded


def _directories_tar(path: Path, members: int) -> Path:
    """A tar of `members` members: one file and `members - 1` empty directories (headers only, fast)."""
    with open(path, "wb") as out:
        for index in range(members - 1):
            info = tarfile.TarInfo(f"d{index:06d}")
            info.type = tarfile.DIRTYPE
            out.write(info.tobuf(tarfile.USTAR_FORMAT))
        info = tarfile.TarInfo("dbt_project.yml")
        info.size = 5
        out.write(info.tobuf(tarfile.USTAR_FORMAT) + b"name\n".ljust(512, b"\0"))
        out.write(b"\0" * 1024)
    return path


def test_default_member_cap_admits_the_policy_maximum_of_workloads() -> None:
    from dpone_dagster.contracts.bounds import MAX_WORKLOADS
    from dpone_dagster.release.source.archive import DEFAULT_MAX_MEMBERS, MEMBERS_PER_WORKLOAD, PROJECT_MEMBERS

    assert MEMBERS_PER_WORKLOAD >= 6  # a generated flow: 2 directories + flow.yaml, dag.yaml, pack.json, one SQL
    assert SourceLimits().max_members == DEFAULT_MAX_MEMBERS == PROJECT_MEMBERS + MEMBERS_PER_WORKLOAD * MAX_WORKLOADS


@pytest.mark.slow  # writes and reads the member cap of files (~1-2 min)
def test_a_source_at_the_default_member_cap_passes_the_count_and_one_more_is_refused(tmp_path: Path) -> None:
    """The pre-scan (where the count is enforced, before anything is written) at the cap and one over.

    A full extraction of 100,000 members takes minutes on a loaded CI machine; the bench's
    10,000-workload row opens such a source end to end with the default limits.
    """
    from dpone_dagster.release.source.tar import TarFormat

    cap = SourceLimits().max_members
    for members, code in ((cap, None), (cap + 1, "source.too_many_members")):
        path = _directories_tar(tmp_path / f"{members}.tar", members)
        with open(path, "rb") as handle:
            scan = TarFormat(handle, SourceLimits(), compressed=False, filter_root=str(tmp_path / "filter"))
            if code is None:
                files = source_module._read_members(scan, SourceLimits(), source_module._NullSink())
                assert [f.path for f in files] == ["dbt_project.yml"]
            else:
                with pytest.raises(SourceError) as caught:
                    source_module._read_members(scan, SourceLimits(), source_module._NullSink())
                assert caught.value.code == code
    small = _directories_tar(tmp_path / "small.tar", 30)
    (tmp_path / "w").mkdir()
    with open_source(small, work_dir=tmp_path / "w") as tree:  # the same archive shape extracts
        assert [f.path for f in tree.snapshot.files] == ["dbt_project.yml"]
