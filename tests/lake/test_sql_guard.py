"""The SQL guard: every form from issue 9 refused with its code, harmless SQL left alone, fuzzed.

Pure parser/lexer tests (no lake): the guard is built for a synthetic fork whose own lake is
`lake_main` and whose one ancestor is attached as `ANC`. The real attacks on a real embedded fork
are in `test_sql_guard_attacks.py`.
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpone_dagster.lake.duck import extension_path
from dpone_dagster.lake.guard.checker import (
    DUCKLAKE_MAINTENANCE,
    DUCKLAKE_READ_ONLY,
    SqlGuard,
    SqlGuardError,
)

ANC = "__wm_dl_main_prod_0123abcd"
FORK = SqlGuard("lake_main", True, frozenset({ANC, f"__ducklake_metadata_{ANC}"}))
PROD = SqlGuard("lake_main", False)
PARENT_CATALOG = "/synthetic/state/lakes/main.ducklake"
PARENT_DATA = "/synthetic/state/lakes/storage/main/"

REFUSED = [
    # 3. raw user ATTACH in every quoting DuckDB accepts; DETACH; USE of an ancestor
    (f"ATTACH $$ducklake:{PARENT_CATALOG}$$ AS p (DATA_PATH '{PARENT_DATA}')", "lake.unmanaged_attach"),
    (f"attach $x$ducklake:{PARENT_CATALOG}$x$ as p", "lake.unmanaged_attach"),
    (f"ATTACH E'ducklake:{PARENT_CATALOG}' AS p (DATA_PATH E'{PARENT_DATA}')", "lake.unmanaged_attach"),
    (f"ATTACH IF NOT EXISTS '{PARENT_CATALOG}' AS p (TYPE ducklake)", "lake.unmanaged_attach"),
    ("ATTACH ':memory:' AS scratch", "lake.unmanaged_attach"),
    (f"/* harmless */ SELECT 1; -- c\n  Attach $$ducklake:{PARENT_CATALOG}$$ AS p", "lake.unmanaged_attach"),
    ("DETACH lake_main", "lake.unmanaged_attach"),
    (f"DETACH DATABASE IF EXISTS {ANC}", "lake.unmanaged_attach"),
    (f"USE {ANC}", "lake.unmanaged_use"),
    (f'use "{ANC.upper()}".main', "lake.unmanaged_use"),
    (f"USE __ducklake_metadata_{ANC}", "lake.unmanaged_use"),
    # 2. maintenance on an ancestor: CALL / SELECT / INSERT…SELECT / macro / PREPARE / shorthand
    (f"CALL ducklake_merge_adjacent_files('{ANC}')", "lake.ancestor_maintenance"),
    (f"SELECT * FROM DuckLake_Merge_Adjacent_Files /* x */ (\n'{ANC}')", "lake.ancestor_maintenance"),
    (f"SELECT * FROM \"ducklake_rewrite_data_files\"('{ANC}')", "lake.ancestor_maintenance"),
    (f"INSERT INTO lake_main.main.t SELECT * FROM ducklake_rewrite_data_files('{ANC}')", "lake.ancestor_maintenance"),
    (f"CALL ducklake_cleanup_old_files('{ANC}', cleanup_all => true)", "lake.ancestor_maintenance"),
    (f"CALL ducklake_delete_orphaned_files('{ANC}', cleanup_all => true)", "lake.ancestor_maintenance"),
    (f"CALL ducklake_expire_snapshots('{ANC}', older_than => now())", "lake.ancestor_maintenance"),
    (f"CALL ducklake_flush_inlined_data('{ANC}')", "lake.ancestor_maintenance"),
    (f"CALL ducklake_set_option('{ANC}', 'parquet_compression', 'zstd')", "lake.ancestor_maintenance"),
    (f"CALL ducklake_add_data_files('{ANC}', 't', '/x.parquet')", "lake.ancestor_maintenance"),
    ("CALL ducklake_add_data_files('lake_main', 't', '/x.parquet')", "lake.ancestor_maintenance"),
    ("CALL ducklake_some_future_function('lake_main2')", "lake.ancestor_maintenance"),
    (f"CALL {ANC}.merge_adjacent_files()", "lake.ancestor_maintenance"),
    (f'CALL "{ANC}" . main . merge_adjacent_files()', "lake.ancestor_maintenance"),
    (f"CALL {ANC}.some_future_function()", "lake.ancestor_maintenance"),
    ("CALL merge_adjacent_files()", "lake.ancestor_maintenance"),
    (f"CALL lake_main.ducklake_merge_adjacent_files('{ANC}')", "lake.ancestor_maintenance"),
    ("CREATE MACRO m(c) AS TABLE FROM ducklake_merge_adjacent_files(c)", "lake.ancestor_maintenance"),
    ("PREPARE p AS SELECT * FROM ducklake_merge_adjacent_files(?)", "lake.ancestor_maintenance"),
    ("SELECT * FROM ducklake_merge_adjacent_files(getvariable('c'))", "lake.ancestor_maintenance"),
    ("CALL ducklake_merge_adjacent_files(E'lake_main')", "lake.ancestor_maintenance"),
    ("CALL ducklake_merge_adjacent_files($$lake_main$$)", "lake.ancestor_maintenance"),
    ("CALL ducklake_merge_adjacent_files('lake_' || 'main')", "lake.ancestor_maintenance"),
    (f"SELECT 1; CALL ducklake_merge_adjacent_files('{ANC}'); SELECT 2", "lake.ancestor_maintenance"),
    # CHECKPOINT forms
    (f"CHECKPOINT {ANC}", "lake.ancestor_maintenance"),
    (f"force checkpoint {ANC}", "lake.ancestor_maintenance"),
    ("CHECKPOINT", "lake.ancestor_maintenance"),
    ("FORCE CHECKPOINT", "lake.ancestor_maintenance"),
    ("EXPLAIN ANALYZE CHECKPOINT", "lake.ancestor_maintenance"),
    (f"CALL checkpoint('{ANC}')", "lake.ancestor_maintenance"),
    (f"SELECT * FROM force_checkpoint('{ANC}')", "lake.ancestor_maintenance"),
    ("CALL checkpoint()", "lake.ancestor_maintenance"),
    # SQL handed over as a string
    (f"SELECT * FROM query('CALL ducklake_merge_adjacent_files(''{ANC}'')')", "lake.dynamic_sql"),
    ("SELECT * FROM query_table('t')", "lake.dynamic_sql"),
    ("CALL postgres_execute('db', 'DELETE FROM ducklake_data_file')", "lake.dynamic_sql"),
    ("SELECT * FROM json_execute_serialized_sql('{}')", "lake.dynamic_sql"),
    # extensions and security settings
    ("LOAD httpfs", "lake.extension_statement"),
    ("INSTALL httpfs", "lake.extension_statement"),
    ("FORCE INSTALL httpfs", "lake.extension_statement"),
    ("UPDATE EXTENSIONS", "lake.extension_statement"),
    ("SET enable_external_access = true", "lake.guarded_setting"),
    ("SET GLOBAL autoload_known_extensions = true", "lake.guarded_setting"),
    ("RESET autoinstall_known_extensions", "lake.guarded_setting"),
    ("SET extension_directory = '/tmp/x'", "lake.guarded_setting"),
    ("set allowed_directories = ['/']", "lake.guarded_setting"),
    ('SET "allow_unsigned_extensions" = true', "lake.guarded_setting"),
    ("SET lock_configuration = false", "lake.guarded_setting"),
    ("RESET ALL", "lake.sql_unparsable"),  # not DuckDB syntax; the guard refuses `all` as well
    ("PRAGMA enable_external_access = true", "lake.guarded_setting"),
    ("PRAGMA force_checkpoint", "lake.guarded_setting"),
    # DuckDB parses these by reading files; the guard's parser may not, so they are refused
    ("IMPORT DATABASE '/synthetic/export'", "lake.sql_unparsable"),
    ("PRAGMA import_database('/synthetic/export')", "lake.sql_unparsable"),
    ('SELECT U&"d\\0061ta"', "lake.sql_unparsable"),
]

ALLOWED = [
    "SELECT 1",
    "CREATE TABLE lake_main.main.t AS SELECT range AS n FROM range(3)",
    "INSERT INTO lake_main.main.t VALUES (1); UPDATE lake_main.main.t SET n = 2; DELETE FROM lake_main.main.t",
    "SELECT 'ATTACH ''ducklake:/x'' AS y; DETACH lake_main; CHECKPOINT' AS text",
    "-- ATTACH 'ducklake:/x' AS y\nSELECT 2 /* CALL ducklake_merge_adjacent_files('x') */",
    "SELECT $$CALL ducklake_cleanup_old_files('x')$$",
    "CALL ducklake_merge_adjacent_files('lake_main')",
    "SELECT * FROM ducklake_cleanup_old_files('LAKE_MAIN', cleanup_all => true)",
    "CALL lake_main.merge_adjacent_files()",
    "CHECKPOINT lake_main",
    'FORCE CHECKPOINT "lake_main"',
    "CALL checkpoint('lake_main')",
    f"SELECT * FROM ducklake_snapshots('{ANC}')",
    f"SELECT * FROM {ANC}.snapshots()",
    f"SELECT * FROM ducklake_table_info('{ANC}')",
    f"SELECT * FROM ducklake_list_files('{ANC}', 'orders')",
    f"SELECT * FROM {ANC}.main.orders",
    f"SELECT count(*) FROM __ducklake_metadata_{ANC}.ducklake_data_file",
    "USE lake_main",
    "USE lake_main.main",
    "SET threads = 2",
    "SET VARIABLE c = 'lake_main'",
    "RESET threads",
    "PRAGMA table_info('t')",
    "BEGIN; SELECT 1; COMMIT",
    "CREATE OR REPLACE VIEW lake_main.main.v AS SELECT 1 AS a",
    "CREATE SCHEMA IF NOT EXISTS lake_main.staging",
    "DESCRIBE SELECT 1",
    "EXPLAIN SELECT 1",
]


@pytest.mark.parametrize(("sql", "code"), REFUSED)
def test_every_issue_form_is_refused_with_its_code(sql, code):
    with pytest.raises(SqlGuardError) as caught:
        FORK.check(sql)
    assert caught.value.code == code, sql


@pytest.mark.parametrize("sql", ALLOWED)
def test_harmless_sql_and_own_lake_maintenance_pass(sql):
    FORK.check(sql)


def test_prod_refuses_attach_but_may_checkpoint_its_own_lake():
    for sql in ("ATTACH $$ducklake:/x$$ AS p", "DETACH lake_main"):
        with pytest.raises(SqlGuardError) as caught:
            PROD.check(sql)
        assert caught.value.code == "lake.unmanaged_attach"
    for sql in ("CHECKPOINT", "CHECKPOINT lake_main", "CALL ducklake_add_data_files('lake_main', 't', '/f')"):
        PROD.check(sql)
    with pytest.raises(SqlGuardError):
        PROD.check("CALL ducklake_merge_adjacent_files('lake_other')")


def test_the_function_lists_match_the_ducklake_extension_shipped():
    """A DuckLake upgrade that adds a function turns this red until the function is classified
    (prefixed calls fail closed anyway; the `<alias>.<fn>()` shorthand needs the list)."""
    conn = duckdb.connect(config={"autoload_known_extensions": False, "autoinstall_known_extensions": False})
    conn.execute(f"LOAD '{extension_path('ducklake')}'")
    names = {
        row[0].removeprefix("ducklake_")
        for row in conn.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_name LIKE 'ducklake\\_%' ESCAPE '\\'"
        ).fetchall()
    }
    assert names == DUCKLAKE_READ_ONLY | DUCKLAKE_MAINTENANCE
    assert not DUCKLAKE_READ_ONLY & DUCKLAKE_MAINTENANCE


SECURITY_SETTINGS = (
    "enable_external_access", "allowed_directories", "allowed_paths", "autoinstall_known_extensions",
    "autoload_known_extensions", "extension_directory", "lock_configuration",
    "allow_unsigned_extensions", "allow_community_extensions", "allow_persistent_secrets",
    "secret_directory", "custom_extension_repository", "autoinstall_extension_repository",
    "allow_extensions_metadata_mismatch", "disabled_filesystems",
)  # fmt: skip


def test_every_security_setting_of_this_duckdb_is_refused():
    known = {row[0] for row in duckdb.connect().execute("SELECT name FROM duckdb_settings()").fetchall()}
    present = [name for name in SECURITY_SETTINGS if name in known]
    assert len(present) >= 12, "DuckDB renamed its security settings; review GUARDED_SETTING_WORDS"
    for name in present:
        for sql in (f"SET {name} = 'x'", f"RESET {name}", f"SET SESSION {name} TO 'x'"):
            with pytest.raises(SqlGuardError) as caught:
                FORK.check(sql)
            assert caught.value.code == "lake.guarded_setting", sql


# -- fuzz: random composition of allowed and forbidden statements ----------------------------
# Templates: `{s}` is required separation, `{o}` optional separation (both may become comments or
# odd whitespace), `{q:text}` a string literal quoted at random ('…', E'…', $$…$$, $tag$…$tag$).

FORBIDDEN_TEMPLATES = [
    "ATTACH{s}{q:ducklake:/synthetic/parent.ducklake}{s}AS{s}p",
    "ATTACH{s}{q:ducklake:/synthetic/parent.ducklake}{s}AS{s}p{o}({o}DATA_PATH{s}{q:/synthetic/data/}{o})",
    "DETACH{s}lake_main",
    "USE{s}" + ANC,
    "CALL{s}ducklake_merge_adjacent_files{o}({o}{q:" + ANC + "}{o})",
    "SELECT{s}*{s}FROM{s}ducklake_rewrite_data_files{o}({o}{q:" + ANC + "}{o})",
    "INSERT{s}INTO{s}lake_main.main.t{s}SELECT{s}*{s}FROM{s}ducklake_cleanup_old_files{o}({o}{q:"
    + ANC
    + "}{o},{o}cleanup_all{o}=>{o}true{o})",
    "CALL{s}" + ANC + "{o}.{o}merge_adjacent_files{o}({o})",
    "CALL{s}merge_adjacent_files{o}({o})",
    "CREATE{s}MACRO{s}m{o}({o}c{o}){s}AS{s}TABLE{s}FROM{s}ducklake_merge_adjacent_files{o}({o}c{o})",
    "PREPARE{s}p{s}AS{s}SELECT{s}*{s}FROM{s}ducklake_expire_snapshots{o}({o}?{o})",
    "CHECKPOINT{s}" + ANC,
    "FORCE{s}CHECKPOINT",
    "CHECKPOINT",
    "SELECT{s}*{s}FROM{s}query{o}({o}{q:SELECT 1}{o})",
    "LOAD{s}httpfs",
    "SET{s}enable_external_access{o}={o}true",
    "RESET{s}autoload_known_extensions",
]
HARMLESS_TEMPLATES = [
    "SELECT{s}1",
    "SELECT{s}{q:ATTACH 'x' AS y; CHECKPOINT}{s}AS{s}text",
    "CREATE{s}TABLE{s}lake_main.main.t{s}AS{s}SELECT{s}range{s}AS{s}n{s}FROM{s}range{o}({o}3{o})",
    "CREATE{s}OR{s}REPLACE{s}TABLE{s}lake_main.staging.u{o}({o}a{s}INTEGER{o},{o}b{s}VARCHAR{o})",
    "INSERT{s}INTO{s}lake_main.main.t{s}VALUES{o}({o}1{o})",
    "SELECT{s}*{s}FROM{s}" + ANC + ".main.orders{s}WHERE{s}id{o}={o}{q:x}",
    "SELECT{s}*{s}FROM{s}ducklake_snapshots{o}({o}{q:" + ANC + "}{o})",
    "CALL{s}ducklake_merge_adjacent_files{o}({o}'lake_main'{o})",
    "CHECKPOINT{s}lake_main",
]


@st.composite
def separation(draw, required: bool) -> str:
    pieces = st.sampled_from([" ", "\n", "\t", "  ", "/* c */", " /* ; ATTACH */ ", "-- x;\n", "\r\n"])
    parts = draw(st.lists(pieces, min_size=1 if required else 0, max_size=3))
    text = "".join(parts)
    if required and not any(c.isspace() for c in text):
        text += " "
    return text


@st.composite
def literal(draw, text: str) -> str:
    style = draw(st.sampled_from(["plain", "e", "dollar", "tag"]))
    if style == "plain":
        return "'" + text.replace("'", "''") + "'"
    if style == "e":
        return "E'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if style == "dollar":
        return "$$" + text + "$$"
    return "$q1$" + text + "$q1$"


@st.composite
def rendered(draw, template: str) -> str:
    out, i = [], 0
    while i < len(template):
        if template.startswith("{s}", i):
            out.append(draw(separation(True)))
            i += 3
        elif template.startswith("{o}", i):
            out.append(draw(separation(False)))
            i += 3
        elif template.startswith("{q:", i):
            end = template.index("}", i)
            out.append(draw(literal(template[i + 3 : end])))
            i = end + 1
        else:
            word_end = i
            while word_end < len(template) and template[word_end] not in "{":
                word_end += 1
            chunk = template[i:word_end]
            case = draw(st.sampled_from([str, str.upper, str.lower, str.swapcase]))
            out.append(chunk if "'" in chunk else case(chunk))
            i = word_end
    return "".join(out)


@st.composite
def scripts(draw):
    picks = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), min_size=1, max_size=4))
    statements, forbidden = [], False
    for is_forbidden, index in picks:
        pool = FORBIDDEN_TEMPLATES if is_forbidden else HARMLESS_TEMPLATES
        statements.append(draw(rendered(pool[index % len(pool)])))
        forbidden |= is_forbidden
    glue = draw(st.sampled_from([";", ";\n", " ; ", ";/* c */", ";-- c\n"]))
    tail = draw(st.sampled_from(["", ";", ";\n-- end"]))
    return glue.join(statements) + tail, forbidden


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_fuzz_never_lets_a_forbidden_statement_through_nor_refuses_harmless_sql(script):
    sql, forbidden = script
    if forbidden:
        with pytest.raises(SqlGuardError):
            FORK.check(sql)
    else:
        FORK.check(sql)


def test_tokens_are_cut_exactly_and_comments_never_hide_a_token():
    from dpone_dagster.lake.guard.lexer import tokens

    sql = 'SELECT/*c /* nested */ */$x$a;b$x$ -- q;\n,E\'\\\'\' , "a""b" ;'
    assert [t.text for t in tokens(sql)] == ["SELECT", "$x$a;b$x$", ",", "E'\\''", ",", '"a""b"', ";"]


def test_a_lexer_that_gives_up_is_refused_not_trusted(monkeypatch):
    """duckdb.tokenize returns one token for the rest of the text when its lexer fails; the
    text after that token's end is then not a comment, and the SQL is refused."""
    from dpone_dagster.lake.guard import lexer as sql_lexer

    kind = duckdb.tokenize("SELECT")[0][1]
    monkeypatch.setattr(sql_lexer.duckdb, "tokenize", lambda sql: [(0, kind)])
    with pytest.raises(SqlGuardError) as caught:
        sql_lexer.tokens("SELECT 1; DETACH lake_main")
    assert caught.value.code == "lake.sql_unparsable"
