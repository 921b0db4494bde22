"""Native compile: the synthetic dbt project compiled sealed by real dbt, and every refusal.

The real project is compiled once per session (`real_compile` in conftest.py). The checks that run
after dbt (`_require_closure`, `_require_no_drift`) are proven on that real dbt output, replayed
with one thing changed: a manifest naming a file outside the verified inputs, dbt having read other
bytes, a properties file from elsewhere, a source file changing while dbt runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpone_dagster.release.build.native import compile_native, discover_projects
from dpone_dagster.release.errors import MembershipError, NativeCompileError, SourceClosureError
from dpone_dagster.release.source.snapshot import open_source
from tests.release.real_pipeline import SYNTHETIC_PROJECT, replay_compile
from tests.synthetic_project import NATIVE_MODELS

PROJECT = "dbt_project_synthetic"
FCT_ORDERS = f"model.{PROJECT}.fct_orders"


def tiny_project(root: Path, models: dict[str, str], extra: dict[str, str] | None = None) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: tiny\nprofile: tiny\nconfig-version: 2\nversion: '1.0'\n")
    for name, sql in models.items():
        (root / "models" / f"{name}.sql").write_text(sql)
    for path, text in (extra or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_the_synthetic_project_compiles_to_its_models(real_compile):
    compilation = real_compile.native
    [project] = compilation.projects
    assert (project.name, project.path) == ("dbt_project_synthetic", ".")
    assert compilation.source_snapshot_digest == real_compile.tree.snapshot.digest
    assert len(compilation.membership) == NATIVE_MODELS and all(
        uid.startswith("model.dbt_project_synthetic.") for uid in compilation.membership
    )
    assert project.logical_writes["marts.fct_orders"] == "model.dbt_project_synthetic.fct_orders"
    assert {node.materialized for node in project.nodes} >= {"table", "incremental"}
    closure = {item.path for item in project.closure}
    assert {"dbt_project.yml", "macros/synthetic_generator.sql", "models/marts/_marts.yml"} <= closure
    assert "profiles.yml" not in closure and not any(path.startswith("flows/") for path in closure)
    assert compilation.profile_digest.startswith("sha256:")


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
    tiny_project(
        tmp_path / "src", {"a": "select 1 as id", "b": "select * from {{ ref('a') }}"}, {"selectors.yml": selectors}
    )
    with open_source(tmp_path / "src", work_dir=tmp_path) as tree, pytest.raises(MembershipError) as raised:
        compile_native(tree, work_dir=tmp_path)
    assert raised.value.code == "release.membership_mismatch"
    assert "model.tiny.a" in raised.value.message


# ---------------------------------------------------------------------------------------------
# After dbt: closure and drift, on the real project's dbt output


@pytest.fixture
def private_tree(tmp_path):
    """A private verified copy of the real project (tests may change its files)."""
    with open_source(SYNTHETIC_PROJECT, work_dir=tmp_path) as tree:
        yield tree


def refused_closure(action) -> SourceClosureError:
    with pytest.raises(SourceClosureError) as raised:
        action()
    assert raised.value.code == "release.source_closure_mismatch"
    return raised.value


def test_a_manifest_node_from_a_file_outside_the_verified_inputs_is_refused(real_compile, private_tree):
    def ghost(manifest, selected):
        node = dict(manifest["nodes"][FCT_ORDERS])
        node.update(
            unique_id=f"model.{PROJECT}.ghost", name="ghost", original_file_path="models/ghost.sql", path="ghost.sql"
        )
        manifest["nodes"][node["unique_id"]] = node

    error = refused_closure(lambda: replay_compile(private_tree, real_compile.dbt_output, edit=ghost))
    assert "'models/ghost.sql', which is not a verified input" in error.message


def test_a_macro_from_a_file_outside_the_verified_inputs_is_refused(real_compile, private_tree):
    def foreign_macro(manifest, selected):
        name = next(key for key, macro in manifest["macros"].items() if macro["package_name"] == PROJECT)
        manifest["macros"][name] = {**manifest["macros"][name], "original_file_path": "../elsewhere/macros/x.sql"}

    refused_closure(lambda: replay_compile(private_tree, real_compile.dbt_output, edit=foreign_macro))


def test_dbt_having_read_other_bytes_than_were_verified_is_refused(real_compile, private_tree):
    def other_bytes(manifest, selected):
        manifest["nodes"][FCT_ORDERS]["checksum"] = {"name": "sha256", "checksum": "0" * 64}

    error = refused_closure(lambda: replay_compile(private_tree, real_compile.dbt_output, edit=other_bytes))
    assert "dbt read different bytes" in error.message


def test_properties_read_from_outside_the_verified_inputs_are_refused(real_compile, private_tree):
    def foreign_patch(manifest, selected):
        manifest["nodes"][FCT_ORDERS]["patch_path"] = f"{PROJECT}://models/marts/_elsewhere.yml"

    error = refused_closure(lambda: replay_compile(private_tree, real_compile.dbt_output, edit=foreign_patch))
    assert "read properties outside its verified inputs" in error.message


@pytest.mark.parametrize("change", ["rewritten", "removed"])
def test_a_source_file_changing_while_dbt_runs_is_refused(real_compile, private_tree, change):
    model = private_tree.root / "models" / "marts" / "fct_orders.sql"

    def drift():
        if change == "rewritten":
            model.write_text(model.read_text() + "\n-- changed during the compile\n")
        else:
            model.unlink()

    error = refused_closure(lambda: replay_compile(private_tree, real_compile.dbt_output, during=drift))
    assert "changed while the project was compiled" in error.message


def test_the_unchanged_replay_on_a_private_copy_passes(real_compile, private_tree):
    """The refusals above are caused by their one change, not by the replay or the copy."""
    assert replay_compile(private_tree, real_compile.dbt_output).projects == real_compile.native.projects
