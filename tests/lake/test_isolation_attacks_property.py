"""Isolation as a property under attack: random sequences of refused attacks and legitimate fork
writes, taken from the fork's side through the project's real doors, never change the parent.

The doors: the connection `DuckLakeResource.connect()` hands to asset code (this process acts for
the fork: `DPONE_WORKSPACE=<fork>`), `dpone lake sql <fork> main --execute` (CliRunner), and a small
in-process Dagster asset that uses the `ducklake` resource. The attacks:
- DuckLake maintenance on the ancestor alias in random spellings (CALL / SELECT FROM / INSERT…SELECT
  / WITH, literal quoted '…', $$…$$, $t$…$t$, E'…', any case, comments, several statements;
  `CHECKPOINT <alias>`, bare `CHECKPOINT`, `checkpoint('<alias>')`, `<alias>.merge_adjacent_files()`),
  each refused `lake.ancestor_maintenance` (or `lake.unmanaged_use` for `USE <alias>; …`);
- ATTACH of the parent's catalog with its data path, quoted every way DuckDB accepts, mixed case,
  commented, inside several statements, and DETACH of the ancestor — `lake.unmanaged_attach`;
- run config and tags on the Dagster asset naming the parent workspace: config validation error
  (the resource has no field) or `workspace.not_this_deployment`.
Between them, legitimate writes (resource, CLI, the asset without overrides, `CHECKPOINT` and
compaction of the fork's own lake) must land in the fork. After EVERY step the parent's data files
(relative names + sha256), every row of every `ducklake_*` table of its catalog file and the sha256
of that file (read while no connection has it open; nothing in this process keeps one) are what
they were before the step.

What a reader could get wrong: the baseline is re-taken at the start of each example (and checked
against the start of the test at the end), so when a guard is removed the shrunk failing sequence is
the one that breaks it, not any sequence run after an earlier example damaged the parent. An
unguarded maintenance call fails at DuckLake's commit, and after such a failed commit DuckDB 1.5 keeps
the fork's catalog file attached in the process even after `close()`: every later attach of it in
the same process fails ("Unique file handle conflict"), so with a guard removed hypothesis may
report a FlakyFailure whose first sub-exception is the unrefused attack. The PostgreSQL + S3 variant
is not here: the resource and the CLI read the lake from the process configuration (`dpone.yaml`),
while the pg/S3 fixtures build theirs in memory; below-DuckLake refusals on that backend are
`test_readonly_ancestors.py`, and `test_isolation_files_property.py` runs file doors, maintenance,
quoted ATTACH forms and run-config overrides on both backends (it hands the process the PostgreSQL
lake through `DPONE_CONFIG`).
"""

from __future__ import annotations

import gc
import hashlib
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInvalidConfigError, MaterializeResult, asset, materialize
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dpone_dagster.config import load_config
from dpone_dagster.integration.binding import WORKSPACE_TAG
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.guard.checker import SqlGuardError
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, ancestor_alias
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

from .lakes import materialize as managed_materialize
from .lakes import run_error_text, run_sql

FORK = "wm-fork-prop-atk"
ANC = ancestor_alias("main", "prod")
MAINTENANCE, ATTACH, USE = "lake.ancestor_maintenance", "lake.unmanaged_attach", "lake.unmanaged_use"
NOT_THIS_DEPLOYMENT = "workspace.not_this_deployment"

# -- attack spellings ------------------------------------------------------------------------

LITERALS = ["'{a}'", "'{A}'", "$${a}$$", "$t${a}$t$", "E'{a}'", "'{A}' "]
IDENTS = ["{a}", "{A}", '"{a}"']
FUNCTIONS = [
    ("ducklake_merge_adjacent_files", ""),
    ("DuckLake_Rewrite_Data_Files", ""),
    ("ducklake_cleanup_old_files", ", cleanup_all => true"),
    ("DUCKLAKE_EXPIRE_SNAPSHOTS", ", older_than => now()"),
]
CALL_FORMS = [
    "CALL {call}",
    "SELECT * FROM {call}",
    "select count(*) from {call}",
    "INSERT INTO lake_main.main.sink SELECT * FROM {call}",
    "WITH m AS (SELECT * FROM {call}) SELECT count(*) FROM m",
]
WRAPPERS = ["{s}", "/* maintenance */ {s}", "-- c\n{s};", "SELECT 1; {s}", "{s}; SELECT 42"]


def _spell(template: str) -> str:
    return template.format(a=ANC, A=ANC.upper())


maintenance = st.one_of(
    st.builds(
        lambda f, lit, form: form.format(call=f"{f[0]}({_spell(lit)}{f[1]})"),
        st.sampled_from(FUNCTIONS),
        st.sampled_from(LITERALS),
        st.sampled_from(CALL_FORMS),
    ),
    st.builds(lambda i: f"CHECKPOINT {_spell(i)}", st.sampled_from(IDENTS)),
    st.sampled_from(["CHECKPOINT", "checkpoint", "FORCE CHECKPOINT"]),
    st.builds(lambda lit: f"CALL checkpoint({_spell(lit)})", st.sampled_from(LITERALS)),
    st.builds(lambda lit: f"SELECT * FROM force_checkpoint({_spell(lit)})", st.sampled_from(LITERALS)),
    st.builds(
        lambda i, form: form.format(call=f"{_spell(i)}.merge_adjacent_files()"),
        st.sampled_from(IDENTS),
        st.sampled_from(CALL_FORMS[:2]),
    ),
).flatmap(lambda sql: st.sampled_from(WRAPPERS).map(lambda w: w.format(s=sql)))

QUOTES = [("'", "'"), ("$$", "$$"), ("$x$", "$x$"), ("E'", "'")]
ATTACH_WORDS = ["ATTACH", "attach", "AtTaCh", "ATTACH DATABASE", "ATTACH IF NOT EXISTS", "/* hi */ ATTACH"]
ATTACH_TAILS = [  # what an attacker does with the writable parent (the first three write it)
    "; CREATE TABLE p.main.planted AS SELECT range AS n FROM range(100)",
    "; CREATE OR REPLACE TABLE p.main.orders AS SELECT 0 AS id; DETACH p",
    "; CALL ducklake_merge_adjacent_files('p')",
    "",
]
# the ancestor alias holds the parent's catalog file READ_ONLY: DuckDB refuses a second attach of
# the same file, so most heads DETACH it first (as a real attacker would)
ATTACH_HEADS = [
    f"DETACH {ANC}; ",
    f"SELECT 1;\ndetach database if exists {ANC.upper()};\n",
    f'/* x */ DETACH "{ANC}"; ',
    "",
    "-- x\n",
]


attach_parts = st.tuples(
    st.sampled_from(ATTACH_HEADS),
    st.sampled_from(ATTACH_WORDS),
    st.sampled_from(QUOTES),
    st.sampled_from(QUOTES),
    st.booleans(),  # the catalog as `ducklake:<file>` or as `<file>` with TYPE ducklake
    st.sampled_from(ATTACH_TAILS),
)
detach = st.sampled_from([f"DETACH {ANC}", f"detach database if exists {ANC.upper()}", f'DETACH "{ANC}"'])

DOORS = ["resource", "cli"]
RUN_TAGS = ["prod", None, "PROD", "wm-fork-prop-atk/../prod"]  # the parent, no tag, near misses
RUN_CONFIGS = [
    None,
    {"resources": {"ducklake": {"config": {"workspace": "prod"}}}},
    {"resources": {"ducklake": {"config": {"data_path": "/tmp/prod", "catalog": "prod"}}}},
]

maint_step = st.tuples(st.just("maint"), st.sampled_from(DOORS), maintenance)
attach_step = st.tuples(st.just("attach"), st.sampled_from(DOORS), attach_parts)
LAUNCHES = [  # (tag, run config) of a Dagster launch naming the parent: tag-only first
    ("dagster", "prod", None), ("dagster", "PROD", None), ("dagster", RUN_TAGS[3], None),
    ("dagster", None, RUN_CONFIGS[1]), ("dagster", "prod", RUN_CONFIGS[1]), ("dagster", None, RUN_CONFIGS[2]),
]  # fmt: skip
OWN_MAINTENANCE = ["CHECKPOINT lake_main", "CALL ducklake_merge_adjacent_files('lake_main')"]
LEGIT = [
    ("write", "resource"), ("write", "cli"), ("dagster", None, None),
    ("own_maint", OWN_MAINTENANCE[0]), ("own_maint", OWN_MAINTENANCE[1]),
]  # fmt: skip
KINDS = [
    maint_step, maint_step, attach_step, attach_step,
    st.tuples(st.just("detach"), st.sampled_from(DOORS), detach),
    st.sampled_from(LAUNCHES),
    st.sampled_from(LEGIT),
]  # fmt: skip
steps = st.integers(0, len(KINDS) - 1).flatmap(KINDS.__getitem__)  # attacks weighted up
# every example ends with a legitimate fork write (derandomized generation would rarely pick one)
operations = st.tuples(st.lists(steps, min_size=2, max_size=5), st.sampled_from(LEGIT)).map(
    lambda ops: [*ops[0], ops[1]]
)


# -- the parent --------------------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parent_state(env) -> tuple:
    """prod's data files (relative names + sha256; fork data under `__wm_forks/` excluded), its
    catalog file's sha256 and WAL presence, and every row of every `ducklake_*` table in it."""
    parent = resolve("prod", "main", config=env.config)
    root = Path(parent.data_path)
    files = tuple(
        (str(Path(p).relative_to(root)), _sha(Path(p)))
        for p in env.list_files(parent.data_path)
        if FORK_DATA_DIR not in Path(p).relative_to(root).parts
    )
    catalog = Path(parent.catalog.target)
    digest, wal = _sha(catalog), Path(str(catalog) + ".wal").exists()
    conn = duckdb.connect(str(catalog), read_only=True)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'ducklake_%' ORDER BY 1"
            ).fetchall()
        ]
        rows = tuple((t, tuple(conn.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall())) for t in tables)
    finally:
        conn.close()
    assert _sha(catalog) == digest, "the catalog file changed while it was read"
    assert files and len(tables) > 10 and any(r for _, r in rows)
    return files, digest, wal, rows


# -- the doors ---------------------------------------------------------------------------------


@asset
def fork_orders(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["orders"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(7)")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "orders"))


def _attack(door: str, sql: str, code: str) -> None:
    if door == "resource":
        got = "not refused"
        with DuckLakeResource().connect("main") as conn:
            try:
                conn.execute(sql)
            except SqlGuardError as refused:
                got = refused.code
            except duckdb.Error as exc:  # the guard let it through and DuckDB/DuckLake failed later
                got = f"not refused ({type(exc).__name__}: {str(exc)[:200]})"  # no traceback kept
        gc.collect()
        assert got == code, (sql, got)
    else:
        result = CliRunner().invoke(_cli(), ["lake", "sql", FORK, "main", "-e", sql])
        assert result.exit_code == 1 and code in result.output, (sql, result.exit_code, result.output)


def _cli():
    from dpone_dagster.cli import app

    return app


def _attach_sql(parent, parts) -> str:
    head, word, (co, cc), (do, dc), prefixed, tail = parts
    catalog = f"ducklake:{parent.catalog.target}" if prefixed else parent.catalog.target
    kind = "" if prefixed else "TYPE ducklake, "
    return f"{head}{word} {co}{catalog}{cc} AS p ({kind}DATA_PATH {do}{parent.data_path}{dc}){tail}"


def _dagster(tag: str | None, run_config: dict | None) -> str:
    """Materialize `fork_orders` in-process with this tag and run config; return what happened."""
    tags = {WORKSPACE_TAG: tag} if tag is not None else None
    if run_config is not None:  # the resource has no field: validation refuses it, whatever the tag
        with pytest.raises(DagsterInvalidConfigError):
            materialize([fork_orders], resources={"ducklake": DuckLakeResource()}, run_config=run_config, tags=tags)
        return "config_refused"
    result = materialize([fork_orders], resources={"ducklake": DuckLakeResource()}, tags=tags, raise_on_error=False)
    if tag is None:
        assert result.success
        return "legit_run"
    assert not result.success and NOT_THIS_DEPLOYMENT in run_error_text(result), tag
    return "tag_refused"


def _fork_value(env, table: str):
    return run_sql(env, FORK, "SELECT 1", fetch=f"SELECT max(v) FROM lake_main.main.{table}")[0][0]


def _step(env, parent, step, counter: int, seen: dict[str, int]) -> None:
    kind = step[0]
    if kind == "maint":
        _attack(step[1], step[2], USE if step[2].lstrip().upper().startswith("USE") else MAINTENANCE)
    elif kind == "attach":
        _attack(step[1], _attach_sql(parent, step[2]), ATTACH)
    elif kind == "detach":
        _attack(step[1], step[2], ATTACH)
    elif kind == "dagster":
        outcome = _dagster(step[1], step[2])
        seen[outcome] = seen.get(outcome, 0) + 1
    elif kind == "write" and step[1] == "resource":
        with DuckLakeResource().connect("main") as conn:
            conn.execute(f"CREATE OR REPLACE TABLE lake_main.main.by_resource AS SELECT {counter} AS v")
        assert _fork_value(env, "by_resource") == counter
    elif kind == "write":
        sql = f"CREATE OR REPLACE TABLE lake_main.main.by_cli AS SELECT {counter} AS v"
        result = CliRunner().invoke(_cli(), ["lake", "sql", FORK, "main", "-e", sql])
        assert result.exit_code == 0, result.output
        assert _fork_value(env, "by_cli") == counter
    elif kind == "own_maint":
        with DuckLakeResource().connect("main") as conn:
            conn.execute(step[1])
    seen[kind] = seen.get(kind, 0) + 1


@pytest.mark.slow
def test_attacks_from_a_fork_never_change_the_parent_embedded(embedded_lake, monkeypatch):
    env = embedded_lake
    # prod: many small files, a deletion and expired snapshots (so every maintenance call has work)
    managed_materialize(env, "prod", "events", "SELECT range AS id FROM range(5000)")
    run_sql(
        env,
        "prod",
        [f"INSERT INTO lake_main.main.events SELECT range FROM range({i}, {i + 5000})" for i in (5000, 10000, 15000)]
        + ["DELETE FROM lake_main.main.events WHERE id = 7"],
    )
    managed_materialize(env, "prod", "orders", "SELECT 1 AS id")
    managed_materialize(env, "prod", "orders", "SELECT range AS id FROM range(25)")
    run_sql(env, "prod", "CALL ducklake_expire_snapshots('lake_main', older_than => now())")
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    parent = resolve("prod", "main", config=env.config)
    initial = _parent_state(env)
    seen: dict[str, int] = {}

    @settings(
        max_examples=15,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=operations)
    @example(
        ops=[
            ("maint", "resource", f"CALL ducklake_cleanup_old_files('{ANC}', cleanup_all => true)"),
            ("attach", "cli", (ATTACH_HEADS[0], "ATTACH", ("$$", "$$"), ("'", "'"), True, ATTACH_TAILS[0])),
            ("attach", "resource", (ATTACH_HEADS[2], "attach", ("E'", "'"), ("$x$", "$x$"), False, ATTACH_TAILS[1])),
            ("dagster", "prod", None),
            ("dagster", None, RUN_CONFIGS[1]),
            ("write", "resource"),
        ]
    )
    def prop(ops):
        before = _parent_state(env)
        for counter, step in enumerate(ops):
            _step(env, parent, step, counter, seen)
            assert _parent_state(env) == before, step

    prop()
    assert _parent_state(env) == initial
    assert run_sql(env, "prod", "SELECT 1", fetch="SELECT count(*) FROM lake_main.main.orders") == [(25,)]
    # the sequences did cover every kind of step (derandomized: the same sequences on every run)
    assert seen.get("maint", 0) >= 5 and seen.get("attach", 0) >= 5, repr(seen)
    kinds = ("write", "detach", "own_maint", "config_refused", "legit_run", "tag_refused")
    assert all(seen.get(k, 0) >= 1 for k in kinds), repr(seen)
