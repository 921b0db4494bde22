"""Property tests: hostile member names never escape the private root, and accepted sets never collide."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpone_dagster.release.source.archive import NameRegistry, SourceError, SourceLimits, check_member_name, fold
from dpone_dagster.release.source.snapshot import open_source

NAME_CODES = {
    "source.invalid_path",
    "source.absolute_path",
    "source.path_traversal",
    "source.drive_letter",
    "source.path_too_long",
}
SET_CODES = NAME_CODES | {"source.duplicate_member", "source.case_collision", "source.path_conflict"}

hostile_alphabet = st.sampled_from(
    ["a", "A", "b", "/", ".", "..", "\\", ":", "C:", "\x00", "\n", "\u00e9", "e\u0301", "\ufb01", "fi", "\udcff", " "]
)
hostile_names = st.lists(hostile_alphabet, min_size=1, max_size=8).map("".join)
any_names = st.one_of(hostile_names, st.text(max_size=40))


@settings(max_examples=600, deadline=None)
@given(raw=any_names, is_dir=st.booleans())
def test_accepted_names_are_plain_relative_paths(raw: str, is_dir: bool) -> None:
    try:
        path = check_member_name(raw, is_dir=is_dir, limits=SourceLimits())
    except SourceError as error:
        assert error.code in NAME_CODES
        return
    if path == "":
        assert is_dir and raw in (".", "./")
        return
    parts = path.split("/")
    assert not path.startswith("/") and "\\" not in path and "\x00" not in path
    assert all(part not in ("", ".", "..") for part in parts)
    assert os.path.normpath(path) == path
    root = "/private/root"
    assert os.path.commonpath([root, os.path.normpath(os.path.join(root, path))]) == root


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.tuples(hostile_names, st.booleans()), min_size=1, max_size=6))
def test_registry_accepts_only_collision_free_sets(names: list[tuple[str, bool]]) -> None:
    registry = NameRegistry()
    accepted: list[tuple[str, str]] = []
    for raw, is_dir in names:
        try:
            path = check_member_name(raw, is_dir=is_dir, limits=SourceLimits())
            if not path:
                continue
            registry.add(path, "dir" if is_dir else "file")
        except SourceError as error:
            assert error.code in SET_CODES
            return
        accepted.append((path, "dir" if is_dir else "file"))
    files = [p for p, kind in accepted if kind == "file"]
    assert len(files) == len(set(files))
    folded: dict[str, str] = {}
    for path, _ in accepted:
        parts = path.split("/")
        for index in range(1, len(parts) + 1):
            prefix = "/".join(parts[:index])
            assert folded.setdefault(fold(prefix), prefix) == prefix
    for path in files:
        assert not any(other.startswith(path + "/") for other, _ in accepted)


def _tar_bytes(names: list[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for index, name in enumerate(names):
            info = tarfile.TarInfo("placeholder")
            info.pax_headers = {"path": name}
            data = f"-- member {index}\n".encode()
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(hostile_names, min_size=1, max_size=4))
def test_hostile_tar_extracts_inside_root_or_leaves_nothing(tmp_path_factory, names: list[str]) -> None:
    base = tmp_path_factory.mktemp("hostile")
    archive = base / "s.tar"
    archive.write_bytes(_tar_bytes(names))
    work = base / "work"
    work.mkdir()
    try:
        tree = open_source(archive, work_dir=work)
    except SourceError as error:
        assert error.code in SET_CODES | {"source.unsafe_member"}
        assert list(work.iterdir()) == []
        return
    with tree:
        written = sorted(str(p.relative_to(tree.root)) for p in tree.root.rglob("*") if p.is_file())
        assert written == sorted(f.path for f in tree.snapshot.files)
        assert len(written) == len(names)
        assert [p for p in base.rglob("*") if p.is_file() and p != archive and tree.root not in p.parents] == []
    assert list(work.iterdir()) == []


def test_names_inside_real_extraction_root(tmp_path: Path) -> None:
    archive = tmp_path / "s.tar"
    archive.write_bytes(_tar_bytes(["a/b.sql", "a/c/d.sql"]))
    with open_source(archive, work_dir=tmp_path) as tree:
        assert (tree.root / "a/c/d.sql").read_bytes() == b"-- member 1\n"


def _valid_archives() -> dict[str, bytes]:
    import zipfile

    tar_buffer = io.BytesIO()
    with tarfile.open(fileobj=tar_buffer, mode="w:gz") as archive:
        for name, data in (("a/x.sql", b"select 1;\n" * 20), ("b.yaml", b"k: v\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    zip_buffer = io.BytesIO()
    with zipfile.ZipFile(zip_buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a/x.sql", b"select 1;\n" * 20)
        archive.writestr("b.yaml", b"k: v\n")
    return {"tar.gz": tar_buffer.getvalue(), "zip": zip_buffer.getvalue()}


VALID_ARCHIVES = _valid_archives()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(sorted(VALID_ARCHIVES)),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.one_of(st.none(), st.floats(0, 1)),
)
def test_corrupted_archives_fail_only_with_source_errors(tmp_path_factory, kind: str, edits, cut) -> None:
    data = bytearray(VALID_ARCHIVES[kind])
    for position, value in edits:
        data[int(position * len(data))] = value
    if cut is not None:
        data = data[: int(cut * len(data))]
    base = tmp_path_factory.mktemp("fuzz")
    (base / "s").write_bytes(bytes(data))
    work = base / "work"
    work.mkdir()
    try:
        with open_source(base / "s", work_dir=work) as tree:
            assert all(tree.read_bytes(f.path) is not None for f in tree.snapshot.files)
    except SourceError:
        pass
    assert list(work.iterdir()) == []
