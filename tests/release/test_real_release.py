"""The real release of the real `dbt_project_synthetic` (dbt models + flows): golden tree and determinism.

The golden file `golden/real_release_tree.json` holds the release identity and the SHA-256 and size
of every member of the release the real pipeline builds from the committed project (real dbt
compile, real flow capture, composition, bundle verification; only the authority is synthetic). A
changed project, dbt version, capture or composition changes it. When the change is deliberate,
regenerate and review the diff:

    DPONE_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/release/test_real_release.py -k golden

What a reader could get wrong: the golden tree must not depend on the machine. Every run here uses
another extraction directory, stage directory and registry root; an absolute path, timestamp or
environment value reaching a member would show up as a second identity.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dpone_dagster.release.source.snapshot import open_source
from tests.release.fabricated import SyntheticTarget
from tests.release.real_pipeline import SYNTHETIC_PROJECT, compose_real, pipeline_for, release_tree, replay_compile

GOLDEN = Path(__file__).resolve().parent / "golden" / "real_release_tree.json"
REGENERATE = os.environ.get("DPONE_REGENERATE_GOLDEN") == "1"


def golden_document(bundle, native) -> dict:
    return {
        "dbt_version": native.dbt_version,
        "adapter_version": native.adapter_version,
        "native_membership": list(bundle.native_membership),
        "ordinary_membership": list(bundle.ordinary_membership),
        **release_tree(bundle),
    }


def test_the_real_release_tree_equals_the_golden_file(real_compile, real_release):
    produced = golden_document(real_release.bundle, real_compile.native)
    if REGENERATE:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(produced, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    changed = sorted(
        path
        for path in set(golden["members"]) | set(produced["members"])
        if golden["members"].get(path) != produced["members"].get(path)
    )
    assert changed == [], f"members differ from {GOLDEN.name} (regenerate deliberately: DPONE_REGENERATE_GOLDEN=1)"
    assert produced == golden
    assert len(produced["native_membership"]) == 11 and len(produced["ordinary_membership"]) == 3


def test_the_golden_tree_is_the_whole_release(real_release):
    """Every member is bound by the parent; the tree has native, selection, ordinary and source members."""
    members = real_release.bundle.members
    kinds = {path.split("/", 1)[0] for path in members}
    assert kinds == {"release.json", "native", "ordinary", "sources"}
    sources = {path.split("/", 2)[2] for path in members if path.startswith("sources/")}
    assert {"dbt_project.yml", "models/marts/fct_orders.sql", "flows/orders_snapshot/pack.json"} <= sources
    assert not any(part in path for path in sources for part in ("profiles.yml", "target/", "logs/"))


def test_replaying_dbt_output_gives_the_same_compilation(real_compile):
    """The replay the mutation tests use is faithful: same projection as the real compile."""
    assert replay_compile(real_compile.tree, real_compile.dbt_output) == real_compile.native


def test_twenty_compositions_of_the_real_compile_give_one_identity_and_identical_bytes(real_compile, tmp_path):
    first = None
    identities = set()
    for run in range(20):
        stage = tmp_path / f"stage-{run}"
        stage.mkdir()
        built = compose_real(
            real_compile.tree, real_compile.native, tmp_path / f"root-{run}", target=SyntheticTarget(), work_dir=stage
        )
        identities.add(built.bundle.release_id)
        tree = release_tree(built.bundle)
        first = first or tree
        assert tree == first
    assert len(identities) == 1


@pytest.mark.slow
def test_a_second_full_run_with_dbt_in_fresh_directories_gives_the_golden_identity(
    real_compile, real_release, tmp_path, monkeypatch
):
    """Two full runs (source extraction, dbt compile, capture, compose): the session's and this one.

    This one runs from another extraction and stage directory, another working directory and
    another time zone; the compile projection and the whole release tree must be identical.
    """
    fresh = tmp_path / "elsewhere" / "deeper"
    fresh.mkdir(parents=True)
    monkeypatch.chdir(fresh)
    monkeypatch.setenv("TZ", "Pacific/Auckland")
    with open_source(SYNTHETIC_PROJECT, work_dir=fresh) as tree:
        assert tree.root != real_compile.tree.root
        native = pipeline_for(SyntheticTarget(), fresh / "state", work_dir=fresh).compile_native(tree)
        again = compose_real(tree, native, fresh / "state", work_dir=fresh).bundle
    assert [p.selection_document for p in native.projects] == [
        p.selection_document for p in real_compile.native.projects
    ]
    assert release_tree(again) == release_tree(real_release.bundle)
    assert again.release_id == real_release.bundle.release_id == json.loads(GOLDEN.read_text())["release_id"]
