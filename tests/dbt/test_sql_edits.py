"""A model's plain-SQL edit reaches the manifest without a `dbt parse`, exactly as dbt would write it.

The proof is dbt itself: after an edit the manifest `prepare_manifest` writes without starting dbt
must equal, node for node, the one a real `dbt parse` of the same files writes. Every edit that
could change something else than `raw_code` and `checksum` (Jinja, a captured block, YAML, a new
file, a manifest someone else rewrote) must still parse. Edits happen in a copy of the demo project.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from dbt_lakes import DBT_PROJECT_DIR

from dpone_dagster.integration.dbt.sql_edits import dbt_checksum, follow_sql_edits, jinja_shape

REVENUE = "models/marts/daily_revenue.sql"
VOLATILE = ("created_at",)  # set from the clock at every parse


@pytest.fixture
def project(tmp_path):
    from dagster_dbt import DbtProject

    copy = tmp_path / "dbt_project_synthetic"
    shutil.copytree(DBT_PROJECT_DIR, copy, ignore=shutil.ignore_patterns("target", "logs", "flows"))
    return DbtProject(project_dir=copy, profiles_dir=copy)


def _edit(project, relative: str, old: str, new: str) -> None:
    path = project.project_dir / relative
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _nodes(manifest: dict) -> dict:
    return {
        key: {field: value for field, value in node.items() if field not in VOLATILE}
        for key, node in manifest["nodes"].items()
    }


def _dbt_parse(project, target) -> dict:
    from dpone_dagster.integration.dbt.project import dbt_executable

    env = {**os.environ, "DBT_TARGET_PATH": str(target), "DBT_PROFILES_DIR": str(project.profiles_dir)}
    done = subprocess.run(
        [dbt_executable(), "parse", "--quiet"], cwd=project.project_dir, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((target / "manifest.json").read_text())


def _invocation(project) -> str:
    return json.loads(project.manifest_path.read_text())["metadata"]["invocation_id"]


def test_a_plain_sql_edit_writes_what_dbt_parse_would_without_running_dbt(project, tmp_path):
    from dpone_dagster.integration.dbt.project import manifest_is_current, prepare_manifest

    assert prepare_manifest(project) is True  # the first preparation parses
    parsed_by = _invocation(project)
    partial = project.project_dir / "target" / "partial_parse.msgpack"
    partial_before = partial.read_bytes()

    _edit(project, REVENUE, "sum(amount) as net_amount", "sum(amount) + 0 as net_amount")
    _edit(project, "models/marts/fct_orders.sql", "select", "select -- a comment in the SQL\n   ")
    assert not manifest_is_current(project)
    assert prepare_manifest(project) is True
    assert manifest_is_current(project)
    assert _invocation(project) == parsed_by  # no dbt invocation wrote this manifest
    assert partial.read_bytes() == partial_before  # nor dbt's partial-parse state

    followed = json.loads(project.manifest_path.read_text())
    assert "+ 0 as net_amount" in followed["nodes"]["model.dbt_project_synthetic.daily_revenue"]["raw_code"]
    assert _nodes(followed) == _nodes(_dbt_parse(project, tmp_path / "real-parse"))
    assert prepare_manifest(project) is False  # current now


@pytest.mark.parametrize(
    ("relative", "old", "new"),
    [
        (REVENUE, 'ref("stg_payments")', 'ref("stg_orders")'),  # a ref: the graph changes
        (REVENUE, "select", '{{ config(materialized="view") }}\nselect'),  # a config call
        (REVENUE, "select", "{% set note %}view{% endset %}\nselect"),  # data captured into a variable
        ("models/marts/_marts.yml", "models:", "models:\n"),  # YAML
        ("models/staging/stg_orders.sql", "from", "{# a Jinja comment #}\nfrom"),
    ],
    ids=["ref", "config", "set-block", "yaml", "jinja-comment"],
)
def test_an_edit_beyond_plain_sql_is_parsed_by_dbt(project, relative, old, new):
    from dpone_dagster.integration.dbt.project import prepare_manifest

    assert prepare_manifest(project) is True
    parsed_by = _invocation(project)
    _edit(project, relative, old, new)
    assert prepare_manifest(project) is True
    assert _invocation(project) != parsed_by  # dbt parsed


def test_a_new_model_file_is_parsed_by_dbt(project):
    from dpone_dagster.integration.dbt.project import prepare_manifest

    assert prepare_manifest(project) is True
    parsed_by = _invocation(project)
    added = project.project_dir / "models" / "marts" / "revenue_copy.sql"
    added.write_text('select * from {{ ref("daily_revenue") }}')
    assert prepare_manifest(project) is True
    assert _invocation(project) != parsed_by
    assert "model.dbt_project_synthetic.revenue_copy" in json.loads(project.manifest_path.read_text())["nodes"]


def test_a_manifest_rewritten_from_other_files_is_not_followed(project):
    """A manifest written by something else (a `dbt build` run by hand after an edit that was then
    undone) no longer matches a file nobody touched since: it is parsed, never patched around."""
    from dpone_dagster.integration.dbt.project import prepare_manifest

    assert prepare_manifest(project) is True
    manifest = json.loads(project.manifest_path.read_text())
    stale = manifest["nodes"]["model.dbt_project_synthetic.stg_orders"]
    stale["raw_code"], stale["checksum"] = "select 1", dbt_checksum("select 1")
    project.manifest_path.write_text(json.dumps(manifest))
    parsed_by = _invocation(project)
    _edit(project, REVENUE, "sum(amount) as net_amount", "sum(amount) + 0 as net_amount")
    assert prepare_manifest(project) is True
    assert _invocation(project) != parsed_by


def test_the_jinja_shape_ignores_template_data_only():
    plain = 'select a from {{ ref("x") }} {% if is_incremental() %} where b > 1 {% endif %}'
    assert jinja_shape(plain) == jinja_shape(plain.replace("select a", "select a + 1 as a").replace("b > 1", "b > 2"))
    assert jinja_shape(plain) != jinja_shape(plain.replace('ref("x")', 'ref( "x")'))
    assert jinja_shape("{% set x = 1 %} select {{ x }}") is not None
    for captured in (
        "{% set x %}select 1{% endset %}",
        "{% call set_sql_header(config) %}set s = 1;{% endcall %} select 1",
        "{% filter upper %}select 1{% endfilter %}",
        "{% macro m() %}select 1{% endmacro %}",
    ):
        assert jinja_shape(captured) is None, captured
    assert jinja_shape("select {{ unclosed") is None


def test_follow_sql_edits_declines_what_it_cannot_prove(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("select 2\n")
    node = {
        "resource_type": "model",
        "language": "sql",
        "package_name": "p",
        "original_file_path": "models/a.sql",
        "raw_code": "select 1",
        "checksum": dbt_checksum("select 1"),
    }

    def manifest(*nodes):
        return {"metadata": {"project_name": "p"}, "nodes": {f"model.p.{i}": dict(n) for i, n in enumerate(nodes)}}

    before, after = {"models/a.sql": "d1"}, {"models/a.sql": "d2"}
    followed = manifest(node)
    assert follow_sql_edits(followed, tmp_path, before, after) == ["models/a.sql"]
    assert followed["nodes"]["model.p.0"]["raw_code"] == "select 2"  # stripped, as dbt reads it
    assert followed["nodes"]["model.p.0"]["checksum"] == dbt_checksum("select 2")

    assert follow_sql_edits(manifest(node), tmp_path, before, before) is None  # nothing to follow
    assert follow_sql_edits(manifest(node), tmp_path, before, {**after, "models/b.sql": "d"}) is None  # a new file
    assert follow_sql_edits(manifest(node), tmp_path, {**before, "models/gone.sql": "d"}, after) is None  # deleted
    assert follow_sql_edits(manifest(node, node), tmp_path, before, after) is None  # one file, two nodes
    assert follow_sql_edits(manifest({**node, "language": "python"}), tmp_path, before, after) is None
    assert follow_sql_edits(manifest({**node, "package_name": "other"}), tmp_path, before, after) is None
    untouched = manifest(node)
    (tmp_path / "models" / "a.sql").write_bytes(b"select '\xff'")  # not UTF-8: dbt's error to report
    assert follow_sql_edits(untouched, tmp_path, before, after) is None
    assert untouched == manifest(node)
