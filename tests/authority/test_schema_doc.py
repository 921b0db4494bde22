"""The committed schema reference in docs/authority.md is exactly what the models generate."""

from __future__ import annotations

from devtools import schema_doc
from dpone_dagster.contracts.dispatch import DOCUMENT_TYPES


def test_committed_reference_matches_the_models() -> None:
    assert schema_doc.main(["--check"]) == 0, "run: python -m devtools.schema_doc --write"


def test_reference_covers_every_document_and_points_at_the_one_code_table() -> None:
    text = schema_doc.render()
    for schema, profile in DOCUMENT_TYPES:
        assert f"`{schema}`" in text
        if profile:
            assert f"`{profile}`" in text
    assert "[errors.md](errors.md)" in text
    assert "| Code |" not in text, "error codes have one table, docs/errors.md"


def test_check_detects_a_stale_reference(tmp_path, monkeypatch) -> None:
    stale = tmp_path / "authority.md"
    stale.write_text(f"intro\n{schema_doc.BEGIN}\nold table\n{schema_doc.END}\n")
    monkeypatch.setattr(schema_doc, "DOC_PATH", stale)
    assert schema_doc.main(["--check"]) == 1
    assert schema_doc.main(["--write"]) == 0
    assert schema_doc.main(["--check"]) == 0
    assert stale.read_text().startswith("intro\n")
