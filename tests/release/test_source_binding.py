"""Binding the read source to the configured commit: a checkout's HEAD, an archive's own record."""

from __future__ import annotations

import io
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from devtools.source_builder import build_source_archive
from dpone_dagster.release.source.archive import SourceError
from dpone_dagster.release.source.binding import bind_source_commit, checkout_head
from dpone_dagster.release.source.snapshot import open_source

OTHER = "0" * 40


def git_checkout(root: Path) -> str:
    root.mkdir()
    (root / "models").mkdir()
    (root / "models" / "a.sql").write_text("select 1\n")
    run = lambda *args: subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True)  # noqa: E731
    run("init", "-q")
    run("add", "-A")
    run("-c", "user.email=dev@example.invalid", "-c", "user.name=dev", "commit", "-qm", "synthetic")
    return run("rev-parse", "HEAD").stdout.strip()


def refused(location: Path, commit: str, code: str, tmp_path: Path) -> None:
    with open_source(location, work_dir=tmp_path) as tree, pytest.raises(SourceError) as caught:
        bind_source_commit(location, tree, commit)
    assert caught.value.code == code


def test_checkout_head_must_equal_the_configured_commit(tmp_path: Path) -> None:
    head = git_checkout(tmp_path / "repo")
    assert checkout_head(tmp_path / "repo") == head
    with open_source(tmp_path / "repo", work_dir=tmp_path) as tree:
        bind_source_commit(tmp_path / "repo", tree, head)
    refused(tmp_path / "repo", OTHER, "source.commit_mismatch", tmp_path)


def test_a_directory_outside_git_cannot_be_bound(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.sql").write_text("select 1\n")
    assert checkout_head(plain) is None
    refused(plain, OTHER, "source.commit_unbound", tmp_path)


def test_git_archives_bind_by_the_commit_they_record(tmp_path: Path) -> None:
    head = git_checkout(tmp_path / "repo")
    for fmt in ("tar", "tar.gz", "zip"):
        archive = tmp_path / f"source.{fmt}"
        subprocess.run(
            ["git", "-C", str(tmp_path / "repo"), "archive", f"--format={fmt}", "-o", str(archive), "HEAD"], check=True
        )
        with open_source(archive, work_dir=tmp_path) as tree:
            assert tree.declared_commit == head
            bind_source_commit(archive, tree, head)
        refused(archive, OTHER, "source.commit_mismatch", tmp_path)


def test_built_archive_records_its_commit_and_an_unrecorded_archive_is_unbound(tmp_path: Path) -> None:
    head = git_checkout(tmp_path / "repo")
    recorded = build_source_archive(tmp_path / "repo", tmp_path / "recorded.tar.gz", commit=head)
    bare = build_source_archive(tmp_path / "repo", tmp_path / "bare.tar.gz")
    assert recorded.snapshot == bare.snapshot
    with open_source(tmp_path / "recorded.tar.gz", work_dir=tmp_path) as tree:
        bind_source_commit(tmp_path / "recorded.tar.gz", tree, head)
    refused(tmp_path / "bare.tar.gz", head, "source.commit_unbound", tmp_path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr("a.sql", b"select 1\n")
    (tmp_path / "bare.zip").write_bytes(buffer.getvalue())
    refused(tmp_path / "bare.zip", head, "source.commit_unbound", tmp_path)


def test_a_commit_like_comment_that_is_not_40_hex_is_not_a_record(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": "see HEAD"}) as out:
        info = tarfile.TarInfo("a.sql")
        info.size = 1
        out.addfile(info, io.BytesIO(b"x"))
    (tmp_path / "s.tar").write_bytes(buffer.getvalue())
    refused(tmp_path / "s.tar", OTHER, "source.commit_unbound", tmp_path)


def test_compose_records_the_archive_sha256_in_the_release_state(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from dpone_dagster.release import pipeline as pipeline_module

    bundle = SimpleNamespace(
        release_id="sha256:" + "ab" * 32, native_membership=(), ordinary_membership=("w",), source_bytes=7
    )
    checked = SimpleNamespace(release_id=bundle.release_id)
    monkeypatch.setattr(pipeline_module, "check_composition", lambda **_: checked)
    monkeypatch.setattr(pipeline_module, "compose_checked", lambda *_args, **_: bundle)
    recorded: list[tuple] = []
    states = SimpleNamespace(advance=lambda release_id, state, **detail: recorded.append((state.value, detail)))
    service = pipeline_module.ReleasePipeline(None, "", None, None, None, None, states=states)  # type: ignore[arg-type]
    for sha, expected in (
        ("cd" * 32, {"source_bytes": 7, "source_archive_sha256": "cd" * 32}),
        (None, {"source_bytes": 7}),
    ):
        recorded.clear()
        service.compose(authority=None, source=SimpleNamespace(archive_sha256=sha), native=None, ordinary=None)  # type: ignore[arg-type]
        assert recorded[-1] == ("Composed", expected)


def test_a_checkout_is_read_as_the_commit_files_only_and_edits_refuse(tmp_path: Path) -> None:
    from dpone_dagster.release.source.binding import open_bound_source

    repo = tmp_path / "repo"
    git_checkout(repo)
    (repo / "models" / "b.sql").write_text("select 3\n")
    git = lambda *args: subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)  # noqa: E731
    git("add", "-A")
    git("-c", "user.email=dev@example.invalid", "-c", "user.name=dev", "commit", "-qm", "second")
    head = git("rev-parse", "HEAD").stdout.strip()
    (repo / ".user.yml").write_text("id: 1\n")  # dbt writes this at every run; untracked
    (repo / "notes.txt").write_text("scratch\n")
    (repo / "target").mkdir()
    (repo / "target" / "manifest.json").write_text("{}")
    with open_bound_source(repo, head, work_dir=tmp_path) as tree:
        assert [f.path for f in tree.snapshot.files] == ["models/a.sql", "models/b.sql"]
        assert tree.read_bytes("models/a.sql") == b"select 1\n"

    (repo / "models" / "a.sql").write_text("select 2\n")  # an uncommitted edit
    with pytest.raises(SourceError) as caught:
        open_bound_source(repo, head, work_dir=tmp_path)
    assert caught.value.code == "source.checkout_not_commit" and "1 changed" in str(caught.value)

    (repo / "models" / "a.sql").unlink()  # a committed file deleted from the working tree
    with pytest.raises(SourceError) as caught:
        open_bound_source(repo, head, work_dir=tmp_path)
    assert caught.value.code == "source.checkout_not_commit" and "1 missing" in str(caught.value)


def test_binding_a_checkout_read_whole_refuses_its_untracked_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    head = git_checkout(repo)
    (repo / "models" / "b.sql").write_text("select 3\n")
    refused(repo, head, "source.checkout_not_commit", tmp_path)
