"""The operator documentation names every release refusal code and every denial reason."""

from __future__ import annotations

from pathlib import Path

from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.release import errors
from dpone_dagster.release.runtime import admission
from dpone_dagster.release.runtime.admission import DenialReason

DOC = (Path(__file__).resolve().parents[2] / "docs" / "federation.md").read_text(encoding="utf-8")


def release_codes() -> set[str]:
    classes = [value for module in (errors, admission) for value in vars(module).values()]
    return {code for cls in classes if isinstance(cls, type) and issubclass(cls, CodedError) for code in cls.codes}


def test_every_release_code_is_documented():
    codes = release_codes()
    assert len(codes) >= 20
    assert sorted(code for code in codes if f"`{code}`" not in DOC) == []


def test_every_denial_reason_is_documented():
    assert sorted(reason.value for reason in DenialReason if f"`{reason.value}`" not in DOC) == []
