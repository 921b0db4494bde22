"""One catalogue of every error code: each code in the source has one operator meaning and a row in docs/errors.md."""

from __future__ import annotations

import textwrap

import pytest

from devtools import error_table
from devtools.error_sources import import_every_module, scan_codes
from dpone_dagster import errors
from dpone_dagster.error_catalog import MEANINGS, catalog, described_twice
from dpone_dagster.errors import CODE_SHAPE, DponeError, declared_codes


@pytest.fixture(scope="module")
def loaded():
    """Every module imported, the source scanned once: (catalogue, sites by code)."""
    return error_table.load()


def test_every_code_in_the_source_is_catalogued_with_a_meaning(loaded) -> None:
    entries, sites = loaded
    unknown = sorted(code for code in sites if code not in declared_codes() and code not in MEANINGS)
    assert unknown == [], "give each a meaning in dpone_dagster/error_catalog.py MEANINGS (or its class's codes)"
    assert error_table.undescribed(entries) == []


def test_every_meaning_belongs_to_a_code_in_use(loaded) -> None:
    _, sites = loaded
    assert sorted(set(MEANINGS) - set(sites) - set(declared_codes())) == []


def test_each_code_has_exactly_one_meaning(loaded) -> None:
    assert described_twice() == []


def test_codes_are_dotted_lowercase_and_meanings_are_one_safe_line(loaded) -> None:
    entries, _ = loaded
    for code, entry in entries.items():
        assert CODE_SHAPE.fullmatch(code), code
        meaning = entry.meaning or ""
        assert 20 < len(meaning) < 400 and "\n" not in meaning, code
        for forbidden in ("/home/", "/tmp/", "/work/", "password=", "select ", "insert into", "begin private key"):
            assert forbidden not in meaning.lower(), code


def test_the_committed_table_is_current_and_has_a_row_per_code(loaded) -> None:
    entries, _ = loaded
    assert error_table.main(["--check"]) == 0, f"run: {error_table.COMMAND}"
    table = error_table.DOC_PATH.read_text(encoding="utf-8")
    assert [code for code in entries if f"\n| `{code}` |" not in table] == []


def test_check_fails_on_a_stale_table_and_write_repairs_it(loaded, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(error_table, "DOC_PATH", tmp_path / "errors.md")
    assert error_table.main(["--check"]) == 1
    assert error_table.main(["--write"]) == 0
    assert error_table.main(["--check"]) == 0
    (tmp_path / "errors.md").write_text(
        (tmp_path / "errors.md").read_text().replace("| `lake.unmanaged_use` |", "| `x` |")
    )
    assert error_table.main(["--check"]) == 1


def test_a_code_declared_by_two_classes_is_refused_at_import(monkeypatch) -> None:
    monkeypatch.setattr(errors, "_DECLARED", dict(errors._DECLARED))

    class FirstProbeError(DponeError):
        code = "probe.declared_twice"

    with pytest.raises(TypeError, match="declared by both"):

        class SecondProbeError(DponeError):
            codes = {"probe.declared_twice": "a second class claiming the same code"}

    with pytest.raises(TypeError, match="not a lowercase dotted code"):

        class MalformedProbeError(DponeError):
            code = "Probe-Malformed"

    assert declared_codes()["probe.declared_twice"] is FirstProbeError


def test_a_reloaded_module_may_declare_its_classes_again(monkeypatch) -> None:
    monkeypatch.setattr(errors, "_DECLARED", dict(errors._DECLARED))

    def declare():
        class ReloadedProbeError(DponeError):
            code = "probe.reloaded"

        return ReloadedProbeError

    declare()
    reloaded = declare()
    assert declared_codes()["probe.reloaded"] is reloaded


def test_the_scan_finds_every_form_a_code_is_written_in(tmp_path) -> None:
    (tmp_path / "sample.py").write_text(
        textwrap.dedent(
            """
            import enum

            class OneError(LakeError):
                code = "probe.class_code"

            class SetError(CodedError):
                codes = {"probe.set_member": "meaning"}

            class Reason(enum.StrEnum):
                DENIED = "probe.enum_member"

            def f(exc):
                SetError("probe.call_argument", "message")
                fail("probe.helper_argument", "message")
                LakeError("message", code="probe.keyword")
                reported = getattr(exc, "code", "probe.fallback")
                return open("probe.yaml"), "other.looks_like_a_code", "not a code"
            """
        )
    )
    found = {site.code: (site.form, site.raised_as) for site in scan_codes(tmp_path)}
    assert found == {
        "probe.class_code": ("code", None),
        "probe.set_member": ("codes", None),
        "probe.enum_member": ("enum", "Reason"),
        "probe.call_argument": ("call", "SetError"),
        "probe.helper_argument": ("literal", None),
        "probe.keyword": ("code=", "LakeError"),
        "probe.fallback": ("literal", None),
    }
    assert "other.looks_like_a_code" in {site.code for site in scan_codes(tmp_path, known_areas={"other"})}


def test_the_package_scan_skips_the_catalogue_itself() -> None:
    assert all(site.module != "error_catalog.py" for site in scan_codes())


def test_catalogue_sees_a_class_once_its_module_is_imported() -> None:
    import_every_module("dpone_dagster.workspaces")
    entry = catalog()["workspace.unknown"]
    assert entry.declared_by is not None and entry.declared_by.__name__ == "UnknownWorkspaceError"
    assert entry.meaning == MEANINGS["workspace.unknown"]
