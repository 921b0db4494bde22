"""Native compile: the synthetic dbt project compiled sealed by real dbt, and every refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpone_dagster.release.errors import MembershipError, NativeCompileError, SourceClosureError
from dpone_dagster.release.native import compile_native, discover_projects
from dpone_dagster.release.source import open_source

REPO = Path(__file__).resolve().parents[2]
SYNTHETIC = REPO / "dbt_project_synthetic"
_compiled: dict[str, object] = {}


def compiled(tree):
    """Compile once per source snapshot digest within this module (dbt is slow)."""
    key = tree.snapshot.digest
    if key not in _compiled:
        _compiled[key] = compile_native(tree)
    return _compiled[key]


@pytest.fixture(scope="module")
def synthetic_tree(tmp_path_factory):
    with open_source(SYNTHETIC, work_dir=tmp_path_factory.mktemp("src")) as tree:
        yield tree


def tiny_project(root: Path, models: dict[str, str], extra: dict[str, str] | None = None) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: tiny\nprofile: tiny\nconfig-version: 2\nversion: '1.0'\n")
    for name, sql in models.items():
        (root / "models" / f"{name}.sql").write_text(sql)
    for path, text in (extra or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_the_synthetic_project_compiles_to_its_models(synthetic_tree):
    compilation = compiled(synthetic_tree)
    [project] = compilation.projects
    assert (project.name, project.path) == ("dbt_project_synthetic", ".")
    assert compilation.source_snapshot_digest == synthetic_tree.snapshot.digest
    assert len(compilation.membership) == 10 and all(uid.startswith("model.dbt_project_synthetic.") for uid in compilation.membership)
    assert project.logical_writes["marts.fct_orders"] == "model.dbt_project_synthetic.fct_orders"
    assert {node.materialized for node in project.nodes} >= {"table", "incremental"}
    closure = {item.path for item in project.closure}
    assert {"dbt_project.yml", "macros/synthetic_generator.sql", "models/marts/_marts.yml"} <= closure
    assert "profiles.yml" not in closure and not any(path.startswith("flows/") for path in closure)
    assert compilation.profile_digest.startswith("sha256:")


def test_the_compile_is_independent_of_where_the_source_was_extracted(synthetic_tree, tmp_path):
    with open_source(SYNTHETIC, work_dir=tmp_path) as elsewhere:
        assert elsewhere.root != synthetic_tree.root
        again = compile_native(elsewhere)
    first = compiled(synthetic_tree)
    assert [p.selection_fingerprint for p in again.projects] == [p.selection_fingerprint for p in first.projects]
    assert again.projects[0].selection_document == first.projects[0].selection_document


def test_discovery_skips_packages_build_output_and_hidden_folders(tmp_path):
    for folder in ("a", "nested/b", "a/dbt_packages/dep", "target/x", ".hidden/c", "logs/d"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "dbt_project.yml").write_text("name: x\n")
    assert discover_projects(tmp_path) == ("a", "nested/b")


def test_a_source_without_a_dbt_project_is_refused(tmp_path):
    (tmp_path / "readme.md").write_text("nothing native here\n")
    with open_source(tmp_path) as tree, pytest.raises(NativeCompileError) as raised:
        compile_native(tree)
    assert raised.value.code == "release.native_no_project"


def test_a_project_that_needs_package_downloads_is_refused_before_dbt_runs(tmp_path):
    tiny_project(tmp_path / "src", {"a": "select 1 as id"}, {"packages.yml": "packages: []\n"})
    with open_source(tmp_path / "src") as tree, pytest.raises(NativeCompileError) as raised:
        compile_native(tree)
    assert raised.value.code == "release.native_unsupported_project"


def test_a_path_escaping_the_project_is_refused(tmp_path):
    project = tiny_project(tmp_path / "src", {"a": "select 1 as id"})
    (project / "dbt_project.yml").write_text("name: tiny\nprofile: tiny\nmodel-paths: ['../elsewhere']\n")
    with open_source(project) as tree, pytest.raises(NativeCompileError) as raised:
        compile_native(tree)
    assert raised.value.code == "release.native_unsupported_project"


def test_a_compile_input_that_drifted_from_the_snapshot_is_refused(tmp_path):
    tiny_project(tmp_path / "src", {"a": "select 1 as id"})
    with open_source(tmp_path / "src", work_dir=tmp_path) as tree:
        (tree.root / "models" / "a.sql").write_text("select 2 as id")
        with pytest.raises(SourceClosureError) as raised:
            compile_native(tree)
    assert raised.value.code == "release.source_closure_mismatch"


def test_a_link_inside_the_project_is_refused(tmp_path):
    tiny_project(tmp_path / "src", {"a": "select 1 as id"})
    with open_source(tmp_path / "src", work_dir=tmp_path) as tree:
        os.symlink(tree.root / "models" / "a.sql", tree.root / "models" / "b.sql")
        with pytest.raises(SourceClosureError):
            compile_native(tree)


def test_the_compile_environment_is_scrubbed_and_errors_are_sanitized(tmp_path, monkeypatch):
    monkeypatch.setenv("DPONE_TEST_LEAK", "from-the-parent-environment")
    tiny_project(tmp_path / "src", {"a": "select '{{ env_var(\"DPONE_TEST_LEAK\") }}' as leaked"})
    work = tmp_path / "work"
    work.mkdir()
    with open_source(tmp_path / "src", work_dir=tmp_path) as tree, pytest.raises(NativeCompileError) as raised:
        compile_native(tree, work_dir=work)
    assert raised.value.code == "release.native_compile_failed"
    assert "DPONE_TEST_LEAK" in raised.value.message
    assert str(tmp_path) not in raised.value.message and "from-the-parent-environment" not in raised.value.message
    assert list(work.iterdir()) == []


def test_a_release_selector_that_drops_an_upstream_model_is_incomplete(tmp_path):
    selectors = "selectors:\n  - name: dpone_release\n    definition: 'b'\n"
    tiny_project(tmp_path / "src", {"a": "select 1 as id", "b": "select * from {{ ref('a') }}"}, {"selectors.yml": selectors})
    with open_source(tmp_path / "src", work_dir=tmp_path) as tree, pytest.raises(MembershipError) as raised:
        compile_native(tree, work_dir=tmp_path)
    assert raised.value.code == "release.membership_mismatch"
    assert "model.tiny.a" in raised.value.message
