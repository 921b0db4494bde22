"""What the fork-aware translator costs per dbt node when the code location loads.

dagster-dbt asks the translator for a node's spec once for the node and again for every child and
every test that refers to it (about nine times per node on the generated 1,000-model project).
The translator reads the configured workspace once per spec build (not once per request: reading
the configuration copies the environment) and builds each node's fork-aware spec once per
workspace. Before, both were paid on every request: 8,739 configuration reads and 10,722
`merge_attributes` for 1,000 models, about a fifth of that location's load.

What a reader could get wrong: the memo is keyed by the workspace too, so a translator asked again
after the configured workspace changed (tests do this) answers for the new workspace.
"""

from __future__ import annotations

import json

import pytest
from dagster import AssetSpec

import dpone_dagster.integration.dbt.translator as translator_module
from dpone_dagster.defs.dbt.translator import SyntheticDbtTranslator
from dpone_dagster.integration.dbt.factory import fork_aware_dbt_assets
from dpone_dagster.integration.dbt.project import configured_dbt_project
from dpone_dagster.integration.dbt.translator import FORK_KIND, WORKSPACE_TAG


@pytest.fixture
def counted(monkeypatch):
    """Counts of configuration reads by the translator and of `AssetSpec.merge_attributes` calls."""
    counts = {"config": 0, "merge": 0}
    read, merge = translator_module.load_config, AssetSpec.merge_attributes

    def counting_read(*args, **kwargs):
        counts["config"] += 1
        return read(*args, **kwargs)

    def counting_merge(self, **kwargs):
        counts["merge"] += 1
        return merge(self, **kwargs)

    monkeypatch.setattr(translator_module, "load_config", counting_read)
    monkeypatch.setattr(AssetSpec, "merge_attributes", counting_merge)
    return counts


def test_a_spec_build_reads_the_workspace_once_and_merges_each_table_once(prepared_manifest, counted, monkeypatch):
    monkeypatch.setenv("DPONE_WORKSPACE", "prod")
    assets = fork_aware_dbt_assets(
        project=configured_dbt_project(), translator=SyntheticDbtTranslator(), name="cost_probe", prepare=False
    )
    tables = [spec for spec in assets.specs if "ducklake" in spec.kinds]
    assert len(tables) >= 10
    assert counted["config"] == 1
    # dagster-dbt merges twice per node itself (owners, metadata); the translator adds one per table
    baseline = 2 * len(list(assets.specs))
    assert counted["merge"] <= baseline + len(tables), counted


def test_the_memo_answers_for_the_workspace_configured_now(prepared_manifest, monkeypatch):
    project = configured_dbt_project()
    manifest = json.loads(project.manifest_path.read_text(encoding="utf-8"))
    model = next(uid for uid, node in manifest["nodes"].items() if node["resource_type"] == "model")
    translator = SyntheticDbtTranslator()
    monkeypatch.setenv("DPONE_WORKSPACE", "prod")
    first = translator.get_asset_spec(manifest, model, project)
    assert translator.get_asset_spec(manifest, model, project) is first
    assert FORK_KIND not in first.kinds
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-memo-fork")
    forked = translator.get_asset_spec(manifest, model, project)
    assert FORK_KIND in forked.kinds and forked.tags[WORKSPACE_TAG] == "wm-memo-fork"
    with translator.resolved_workspace() as workspace:
        assert workspace == "wm-memo-fork"
        assert translator.get_asset_spec(manifest, model, project) is forked
