"""`make check-generated` (`python -m devtools.regen --check`) reports a stale generated file and exits 1.

The generators themselves are tested next to what they generate (tests/authority/test_schema_doc.py,
tests/release/test_flows.py, tests/test_definitions_smoke.py, ...); here: the vector comparison the
contract vectors need (their writer has no check mode), and the runner's verdicts.
"""

from __future__ import annotations

import shutil
import sys

from devtools import regen


def test_the_committed_contract_vectors_are_what_the_writer_produces():
    from tests.contracts import document_examples

    assert regen.stale_vectors() == []
    assert document_examples.VECTORS == regen.VECTORS  # the writer points back at the committed folder


def test_a_changed_missing_or_extra_vector_file_is_stale(tmp_path):
    copy = tmp_path / "vectors"
    shutil.copytree(regen.VECTORS, copy)
    assert regen.stale_vectors(copy) == []
    changed = sorted(copy.glob("*.json"))[1]
    changed.write_bytes(changed.read_bytes() + b" ")
    missing = sorted(copy.glob("*.json"))[2]
    missing.unlink()
    (copy / "leftover.json").write_text("{}")
    assert regen.stale_vectors(copy) == sorted([changed.name, missing.name, "leftover.json"])


def _generator(what: str, exit_code: int, **extra) -> regen.Generator:
    command = (sys.executable, "-c", f"raise SystemExit({exit_code})")
    return regen.Generator(what, write=command, check=command, **extra)


def test_check_exits_1_and_names_each_stale_file(capsys):
    generators = (_generator("current one", 0), _generator("stale one", 1))
    assert regen.run(generators, check=True) == 1
    out = capsys.readouterr().out
    assert "current  current one" in out
    assert "STALE  stale one" in out
    assert "1 generated file(s) stale" in out


def test_check_passes_when_every_generator_is_current(capsys):
    assert regen.run((_generator("a", 0), _generator("b", 0)), check=True) == 0


def test_a_generator_not_written_yet_is_skipped_not_failed(capsys):
    assert regen.run((_generator("later", 1, needs="devtools/not_there_yet.py"),), check=True) == 0
    assert "skipped  later" in capsys.readouterr().out


def test_the_write_mode_passes_the_generators_switch_only_when_writing(tmp_path):
    probe = tmp_path / "seen"
    command = (
        sys.executable,
        "-c",
        f"import os, pathlib; pathlib.Path({str(probe)!r}).write_text(os.environ.get('REGEN_PROBE', ''))",
    )
    generator = regen.Generator("probe", write=command, check=command, write_env={"REGEN_PROBE": "write"})
    assert regen.run((generator,), check=False) == 0
    assert probe.read_text() == "write"
    assert regen.run((generator,), check=True) == 0
    assert probe.read_text() == ""
