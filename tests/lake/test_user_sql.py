"""Raw user SQL that attaches a DuckLake is redirected in forks; duplicates of reserved options die."""

from __future__ import annotations

import pytest

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.resolve import resolve
from dpone_dagster.lake.user_sql import attach_clauses, transform_user_sql
from dpone_dagster.workspaces.service import Workspaces

from .lakes import attached, fingerprint, materialize


def _catalog_literal(env) -> str:
    lake = env.lake
    if lake.catalog_kind == "postgres":
        return "ducklake:" + lake.catalog
    return "ducklake:" + str(resolve("prod", config=env.config).catalog.target)


def test_user_attach_with_duplicated_reserved_options_lands_in_the_fork(lake_env):
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    Workspaces(lake_env.config).create_fork("wm-fork-a", "prod", owner="alice")
    resolved = resolve("wm-fork-a", config=lake_env.config)
    parent_path = resolve("prod", config=lake_env.config).data_path
    user_sql = (
        f"ATTACH IF NOT EXISTS '{_catalog_literal(lake_env)}' AS mine "
        f"(metadata_schema 'public', DATA_PATH '{parent_path}', Data_Path '{parent_path}', "
        f"DATA_INLINING_ROW_LIMIT 0, override_data_path true, METADATA_SCHEMA 'main');\n"
        "CREATE TABLE mine.user_table AS SELECT range AS n FROM range(30);"
    )
    rewritten = transform_user_sql(resolved, user_sql)
    [clause] = attach_clauses(rewritten)
    names = [name for name, _ in clause.options]
    expected = ["DATA_INLINING_ROW_LIMIT", "DATA_PATH"]
    if lake_env.kind == "pg_s3":
        expected.append("METADATA_SCHEMA")
    assert names == expected
    assert parent_path not in rewritten and resolved.data_path in rewritten
    assert "'public'" not in rewritten and "'main'" not in rewritten

    before = fingerprint(lake_env)
    with attached(lake_env, "wm-fork-a") as conn:
        conn.execute("DETACH lake_main")
        for statement in rewritten.split(";\n"):
            if statement.strip():
                conn.execute(statement)
        assert conn.execute("SELECT count(*) FROM mine.user_table").fetchone() == (30,)
    assert fingerprint(lake_env) == before
    files = lake_env.list_files(resolved.data_path)
    assert any("user_table" in f for f in files)


def test_transform_leaves_strings_comments_and_other_attaches_alone(embedded_lake):
    Workspaces(embedded_lake.config).create_fork("wm-fork-a", "prod", owner="alice")
    resolved = resolve("wm-fork-a", config=embedded_lake.config)
    sql = (
        "-- ATTACH 'ducklake:/elsewhere' AS x\n"
        "SELECT 'ATTACH ''ducklake:/elsewhere'' AS y' AS text;\n"
        "/* ATTACH 'ducklake:/elsewhere' */ ATTACH ':memory:' AS scratch;"
    )
    assert transform_user_sql(resolved, sql) == sql


def test_other_ducklakes_are_refused_in_forks_and_untouched_outside(embedded_lake):
    Workspaces(embedded_lake.config).create_fork("wm-fork-a", "prod", owner="alice")
    sql = "ATTACH 'ducklake:/some/other.ducklake' AS other"
    with pytest.raises(LakeError) as caught:
        transform_user_sql(resolve("wm-fork-a", config=embedded_lake.config), sql)
    assert caught.value.code == "lake.unmanaged_attach"
    typed = "attach 'x.ducklake' as other (TYPE ducklake)"
    with pytest.raises(LakeError):
        transform_user_sql(resolve("wm-fork-a", config=embedded_lake.config), typed)
    assert transform_user_sql(resolve("prod", config=embedded_lake.config), sql) == sql


def test_attach_without_options_gets_the_fork_options(embedded_lake):
    Workspaces(embedded_lake.config).create_fork("wm-fork-a", "prod", owner="alice")
    resolved = resolve("wm-fork-a", config=embedded_lake.config)
    parent = resolve("prod", config=embedded_lake.config).catalog.target
    out = transform_user_sql(resolved, f"ATTACH 'ducklake:{parent}' AS mine")
    assert out == (
        f"ATTACH 'ducklake:{resolved.catalog.target}' AS mine (DATA_PATH '{resolved.data_path}')"
    )
