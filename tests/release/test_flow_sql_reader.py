"""The one reader of delivered SQL (`release.build.flow_sql`): what it refuses, and that its allowlist holds
against DuckDB's own catalogue (every table function DuckDB has, except the row generators, is refused)."""

from __future__ import annotations

import duckdb
import pytest

from dpone_dagster.contracts.flows import FlowError
from dpone_dagster.release.build.flow_sql import ALLOWED_FUNCTIONS, SAFE_TABLE_FUNCTIONS, flow_sql_writes

HIDING_TRICKS = [
    # The two tricks: the statement after the string is what DuckDB runs.
    ("select E'\\''; copy (select 42) to '/tmp/dpone-leak.csv'; --'", "flows.sql_statement_not_allowed"),
    ("select $q$ ' $q$; attach '/tmp/dpone-leak.duckdb' as leak; select ' '", "flows.sql_statement_not_allowed"),
    ("select e'\\''; install httpfs; --'", "flows.sql_statement_not_allowed"),
    ("select $body$ $$ $body$; pragma enable_profiling; select '$body$'", "flows.sql_statement_not_allowed"),
    ("/* ; */ select 1; /* nested /* */ */ copy s.t to '/tmp/x'", "flows.sql_statement_not_allowed"),
]

HOST_ACCESS = [
    ("create table s.t as select * from read_text('/etc/hostname');", "flows.sql_function_not_allowed"),
    ("create table s.t as select * from read_csv('/etc/hostname');", "flows.sql_function_not_allowed"),
    ("create table s.t as select * from glob('/etc/*');", "flows.sql_function_not_allowed"),
    ("create table s.t as select * from main.read_text('/etc/hostname');", "flows.sql_function_not_allowed"),
    ("create table s.t as select * from \"READ_TEXT\"('/etc/hostname');", "flows.sql_function_not_allowed"),
    ("create table s.t as select * from query('select 1');", "flows.sql_function_not_allowed"),
    (
        "insert into s.t select count(*) from s.u where 1 = (select count(*) from read_blob('/etc/hostname'));",
        "flows.sql_function_not_allowed",
    ),
    ("create table s.t as select mystery_function(1);", "flows.sql_function_not_allowed"),
    ("create table s.t as select x.mystery_method() from s.u as x;", "flows.sql_function_not_allowed"),
    ("create table s.t as select * from '/etc/hostname';", "flows.sql_host_access"),
    ("create table s.t as from '/etc/hostname';", "flows.sql_host_access"),
    ("create table s.t as select * from s.u, '/etc/hostname';", "flows.sql_host_access"),
    ("create table s.t as select * from s.u join '/etc/hostname' on true;", "flows.sql_host_access"),
    ('create table s.t as select * from "data.csv";', "flows.sql_host_access"),
]

STATEMENTS = [
    "copy s.t to '/tmp/out.csv';",
    "export database '/tmp/out';",
    "detach orders_source;",
    "use orders_source;",
    "checkpoint;",
    "summarize s.t;",
    "pivot s.t on a;",
    "rollback;",
    "create macro twice(a) as a * 2;",
    "create or replace function twice(a) as a * 2;",
    "create secret leak (type s3, key_id 'x', secret 'y');",
    "create sequence s.seq;",
    "drop schema s cascade;",
    "alter table s.t rename to u;",
    "alter view s.v rename to w;",
    "select 1; set threads = 1;",
]


@pytest.mark.parametrize(("sql", "code"), HIDING_TRICKS + HOST_ACCESS)
def test_hidden_statements_and_host_files_are_refused(sql: str, code: str) -> None:
    with pytest.raises(FlowError) as refused:
        flow_sql_writes(sql, "flows/x/sql/x.sql")
    assert refused.value.code == code
    assert "/etc" not in refused.value.message and "/tmp" not in refused.value.message


@pytest.mark.parametrize("sql", STATEMENTS)
def test_statements_outside_the_allowlist_are_refused(sql: str) -> None:
    with pytest.raises(FlowError) as refused:
        flow_sql_writes(sql, "flows/x/sql/x.sql")
    assert refused.value.code == "flows.sql_statement_not_allowed"


def test_sql_duckdb_cannot_parse_is_refused() -> None:
    with pytest.raises(FlowError) as refused:
        flow_sql_writes("select from where;", "x.sql")
    assert refused.value.code == "flows.sql_invalid"


def _catalogue() -> dict[str, set[str]]:
    functions: dict[str, set[str]] = {}
    with duckdb.connect() as conn:
        for name, kind in conn.execute("select function_name, function_type from duckdb_functions()").fetchall():
            functions.setdefault(name.lower(), set()).add(kind)
    return functions


def test_every_table_function_duckdb_has_is_refused_except_the_row_generators() -> None:
    functions = _catalogue()
    table_like = sorted(name for name, kinds in functions.items() if kinds & {"table", "table_macro", "pragma"})
    assert {"read_text", "read_csv", "glob", "read_parquet", "query"} <= set(table_like)
    admitted = []
    for name in table_like:
        try:
            flow_sql_writes(f"create table s.t as select * from {name}('x');", "x.sql")
        except FlowError as refused:
            assert refused.code in ("flows.sql_function_not_allowed", "flows.sql_invalid"), (
                name
            )  # `show(` does not parse
        else:
            admitted.append(name)
    assert sorted(admitted) == sorted(SAFE_TABLE_FUNCTIONS)


def test_the_allowlist_names_only_plain_functions_or_grammar() -> None:
    """Each allowed name is a scalar/aggregate function or macro, or grammar DuckDB does not list; only the
    row generators are also table functions."""
    functions = _catalogue()
    for name in ALLOWED_FUNCTIONS:
        kinds = functions.get(name, set())
        assert name in SAFE_TABLE_FUNCTIONS or not kinds & {"table", "table_macro", "pragma"}, name


def test_real_flow_sql_reads_and_writes_what_duckdb_runs() -> None:
    sql = """
    -- a comment naming read_text('/etc/hostname') is only a comment
    create schema if not exists flow_marts;
    insert into flow_marts.t (a, b)
    select count(*) filter (where x > 1), cast(max(x) as decimal(18, 2))
    from range(3) as r(x) join flow_marts.u using (a)
    where 'read_text' <> $tag$ copy $tag$;
    with q(a) as (select 1), p as (select trim(both 'x' from 'xyx') as a) select * from q, p;
    """
    assert flow_sql_writes(sql, "x.sql") == {"flow_marts.t"}
