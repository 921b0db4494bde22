"""Promotion by moving files (`lake/lifecycle/promote_files.py`): on the embedded default and on
PostgreSQL + S3, the fork's files become the parent's (a rename locally, a server-side copy on S3),
survive the fork's drop, are managed by the parent's maintenance, and a crash on either side of the
parent's commit loses nothing. Where a move cannot carry the table's rows, the copy is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from dpone_dagster.control.promotion_tables import fork_promotion_file
from dpone_dagster.control.store import open_store
from dpone_dagster.lake.lifecycle import maintenance
from dpone_dagster.lake.lifecycle.diff import fork_diff
from dpone_dagster.lake.lifecycle.maintenance import maintain
from dpone_dagster.lake.lifecycle.promote import PromotePorts, promote
from dpone_dagster.lake.lifecycle.promote_files import pending_promotions
from dpone_dagster.lake.resolution.attach import absolute_data_path
from dpone_dagster.lake.state.tracking import fork_state
from dpone_dagster.workspaces.service import Workspaces

from .lakes import fingerprint, fork_prefix, materialize, run_sql

FORK = "wm-fork-move"
FORK_ROWS = [(i, i * 11) for i in range(6)]


def as_ws(env, workspace):
    return env.config.model_copy(update={"workspace": workspace})


def later() -> datetime:
    return datetime.now(UTC) + timedelta(days=30)


def no_pins(engine, owner, lake):
    return None


def table_files(env, workspace: str, table: str = "orders") -> list[str]:
    rows = run_sql(
        env, workspace, [], fetch=f"SELECT data_file FROM ducklake_list_files('lake_main', '{table}', schema => 'main')"
    )
    return sorted(f for (f,) in rows)


def orders(env, workspace: str):
    return run_sql(env, workspace, [], fetch="SELECT * FROM lake_main.main.orders ORDER BY ALL")


def prod_data_path(env) -> str:
    return absolute_data_path(env.lake.data_path, env.config.project_root)


@pytest.fixture
def forked(lake_env):
    env = lake_env
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    return env


def promotion_prefix(env) -> str:
    """`promoted-<id>-`: how the one promotion so far names the files it moved into the parent."""
    with open_store(env.config.control_store).connect() as conn:
        [promotion_id] = set(conn.execute(sa.select(fork_promotion_file.c.promotion_id)).scalars())
    return f"promoted-{promotion_id}-"


def reviewed(env) -> str:
    return fork_diff(FORK, ["orders"], key=["id"], config=as_ws(env, FORK)).diff_id


@pytest.mark.slow  # about 40 s on PostgreSQL + S3
def test_moved_files_survive_the_fork_drop_and_prod_maintenance_manages_them(forked):
    env = forked
    fork_files = table_files(env, FORK)
    result = promote(FORK, ["orders"], reviewed(env), config=env.config)
    [table] = result.tables
    assert (table.method, table.copy_reason, table.rows) == ("moved", None, 6)
    promoted = table_files(env, "prod")
    prefix = promotion_prefix(env)
    assert [p.rsplit("/", 1)[1] for p in promoted] == [prefix + f.rsplit("/", 1)[1] for f in fork_files], "same files"
    assert all(p.startswith(prod_data_path(env)) for p in promoted)
    assert set(promoted) <= set(env.list_files(prod_data_path(env)))
    if env.kind == "embedded":
        assert all(os.path.islink(f) and os.readlink(f) == p for f, p in zip(fork_files, promoted))
    else:
        assert set(fork_files) <= set(env.list_files(fork_prefix(env, FORK))), "S3: the fork keeps its object"
    assert orders(env, FORK) == FORK_ROWS, "the fork still reads the table it built"

    report = maintain(config=env.config, clock=later, pins=no_pins)  # orphan sweep + old files, right away
    assert not set(promoted) & set(report.orphaned_files + report.old_files)
    assert Workspaces(env.config).drop(FORK, actor="alice").cleanup.complete
    assert set(promoted) <= set(env.list_files(prod_data_path(env))), "the fork's drop deleted none of them"
    assert orders(env, "prod") == FORK_ROWS
    assert fork_state("prod", "main", "main", "orders", env.config).state == "own"

    materialize(env, "prod", "orders", "SELECT range AS id, 0 AS amount FROM range(3)")  # supersedes them
    report = maintain(config=env.config, clock=later, pins=no_pins)
    assert set(promoted) <= set(report.old_files), "expired and deleted as prod's own"
    assert not set(promoted) & set(env.list_files(prod_data_path(env)))
    assert orders(env, "prod") == [(i, 0) for i in range(3)]


_CRASHING_PROMOTE = """
import json, os, sys
from dpone_dagster.config import DponeConfig
from dpone_dagster.lake.lifecycle.promote import PromotePorts, promote
args = json.loads(sys.stdin.read())
config = DponeConfig.model_validate_json(args["config"])
crash = lambda *_: os._exit(17)
ports = PromotePorts(**{args["point"]: crash})
promote(args["fork"], ["orders"], args["diff_id"], config=config, ports=ports)
"""


def promote_and_crash(env, diff_id: str, point: str) -> None:
    """`promote` in a child process that dies (no cleanup, no `finally`) at `point`."""
    payload = json.dumps({"config": env.config.model_dump_json(), "fork": FORK, "diff_id": diff_id, "point": point})
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_PROMOTE], input=payload, text=True, capture_output=True, env=os.environ.copy()
    )
    assert done.returncode == 17, done.stderr[-2000:]


@pytest.mark.slow  # two child processes, about 60 s on PostgreSQL + S3
def test_a_crash_before_the_commit_loses_nothing_and_recovery_puts_the_files_back(forked):
    env = forked
    diff_id = reviewed(env)
    fork_files = table_files(env, FORK)
    before = fingerprint(env)
    promote_and_crash(env, diff_id, "after_transfer")

    # what remains: the files sit in prod's data path (local: renamed, linked from the fork; S3:
    # copied), journaled pending; prod's catalog and snapshots are unchanged; the fork reads its table
    after = fingerprint(env)
    assert (after.snapshots, after.catalog_files) == (before.snapshots, before.catalog_files)
    pending = pending_promotions(env.config, "prod", "main")
    assert sorted(r["source"] for r in pending) == fork_files
    assert {r["target"] for r in pending} <= set(env.list_files(prod_data_path(env)))
    assert orders(env, FORK) == FORK_ROWS
    assert orders(env, "prod") == [(i, i * 10) for i in range(5)]

    with pytest.MonkeyPatch.context() as patch:  # within the recovery grace: a promotion in flight
        patch.setattr(maintenance, "recover_promotions", lambda *a, **k: [])
        report = maintain(config=env.config, clock=later, pins=no_pins)
    assert report.orphaned_files == [] and any("in flight" in note for note in report.notes)
    assert {r["target"] for r in pending} <= set(env.list_files(prod_data_path(env))), "not swept in flight"

    report = maintain(config=env.config, clock=later, pins=no_pins)  # recovery, then the orphan sweep
    assert pending_promotions(env.config, "prod", "main") == []
    assert not {r["target"] for r in pending} & set(env.list_files(prod_data_path(env)))
    assert all(not os.path.islink(f) for f in fork_files) and orders(env, FORK) == FORK_ROWS
    assert report.orphaned_files == ([] if env.kind == "embedded" else sorted(r["target"] for r in pending))

    result = promote(FORK, ["orders"], diff_id, config=env.config)  # the same review still promotes
    assert result.tables[0].method == "moved" and orders(env, "prod") == FORK_ROWS


@pytest.mark.slow  # one child process, about 40 s on PostgreSQL + S3
def test_a_crash_after_the_commit_keeps_the_published_table_and_recovery_settles_it(forked):
    env = forked
    promote_and_crash(env, reviewed(env), "after_commit")
    assert orders(env, "prod") == FORK_ROWS, "committed: prod has the table"
    assert len(pending_promotions(env.config, "prod", "main")) == len(table_files(env, "prod"))
    maintain(config=env.config, clock=later, pins=no_pins)
    assert pending_promotions(env.config, "prod", "main") == []
    assert orders(env, "prod") == FORK_ROWS and orders(env, FORK) == FORK_ROWS
    assert Workspaces(env.config).drop(FORK, actor="alice").cleanup.complete
    assert orders(env, "prod") == FORK_ROWS


def promoted(env, diff_id=None, **ports):
    result = promote(FORK, ["orders"], diff_id or reviewed(env), config=env.config, ports=PromotePorts(**ports))
    [table] = result.tables
    assert orders(env, "prod") == orders(env, FORK)
    assert not any("__wm_forks" in f for f in table_files(env, "prod")), "never a file of the fork's"
    return table


def three_files(env) -> list[str]:
    """The fork's `orders` as three data files (a build and two appends), as a 1 GB table is."""
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(2)")
    for start in (2, 4):
        sql = f"INSERT INTO lake_main.main.orders SELECT range, range * 11 FROM range({start}, {start + 2})"
        run_sql(env, FORK, sql, targets=["orders"])
    files = table_files(env, FORK)
    assert len(files) == 3
    return files


def test_a_table_of_several_files_is_registered_whole_and_only_its_files(lake_env):
    """The files are registered through one glob of the promotion's own name: exactly the three,
    not the parent's earlier file of the same table in the same folder."""
    env = lake_env
    fork_files = three_files(env)
    table = promoted(env)
    assert (table.method, table.rows) == ("moved", 6)
    names = sorted(promotion_prefix(env) + f.rsplit("/", 1)[1] for f in fork_files)
    assert sorted(p.rsplit("/", 1)[1] for p in table_files(env, "prod")) == names
    assert orders(env, "prod") == FORK_ROWS


def test_a_data_path_with_a_glob_character_still_moves(embedded_lake):
    """`[` in the parent's data path would make the glob a character class matching nothing: the
    files are listed instead, and still move."""
    env = embedded_lake
    lake = env.config.lakes[0]
    bracketed = lake.model_copy(update={"data_path": lake.data_path.rstrip("/") + "[1]/"})
    env = replace(env, config=env.config.model_copy(update={"lakes": (bracketed,)}))
    three_files(env)
    table = promoted(env)
    assert (table.method, table.copy_reason, table.rows) == ("moved", None, 6)
    assert all("[1]/main/orders/promoted-" in p for p in table_files(env, "prod"))


def test_registration_is_one_glob_only_where_it_names_exactly_the_moved_files():
    from dpone_dagster.lake.lifecycle.promote_files import registration_paths

    pid = "0f" * 16
    several = [f"/d/main/t/promoted-{pid}-ducklake-{i}.parquet" for i in range(3)]
    assert registration_paths(several, pid) == [f"/d/main/t/promoted-{pid}-*"]
    s3 = [f"s3://b/lakes/main/t/promoted-{pid}-{i}.parquet" for i in range(2)]
    assert registration_paths(s3, pid) == [f"s3://b/lakes/main/t/promoted-{pid}-*"]
    assert registration_paths(several[:1], pid) == several[:1], "one file: no glob needed"
    for odd in ("/d[1]/main/t", "/d*/main/t", "/d?/main/t", "/d{a,b}/main/t"):
        files = [f"{odd}/promoted-{pid}-{i}.parquet" for i in range(2)]
        assert registration_paths(files, pid) == files, odd
    assert registration_paths([several[0], f"/d/main/u/promoted-{pid}-x.parquet"], pid)[1].endswith("x.parquet")
    assert registration_paths([several[0], "/d/main/t/ducklake-x.parquet"], pid)[1].endswith("ducklake-x.parquet")


def test_deleted_rows_are_copied_not_moved(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    run_sql(env, FORK, "DELETE FROM lake_main.main.orders WHERE id = 2", targets=["orders"])
    table = promoted(env)
    assert (table.method, table.rows) == ("copied", 5) and "delete" in table.copy_reason


def test_a_partitioned_table_is_copied(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(3)")
    run_sql(
        env,
        FORK,
        [
            "ALTER TABLE lake_main.main.orders SET PARTITIONED BY (id)",
            "INSERT INTO lake_main.main.orders SELECT range, range * 11 FROM range(3, 6)",
        ],
        targets=["orders"],
    )
    table = promoted(env)
    assert (table.method, table.copy_reason, table.rows) == ("copied", "a partitioned table", 6)


def test_a_file_with_a_second_name_in_the_fork_is_not_moved(embedded_lake):
    """A fork could keep writing a file it hard-linked: the move is refused, every table is copied."""
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    [source] = table_files(env, FORK)
    os.link(source, source + ".kept")
    table = promoted(env)
    assert table.method == "copied" and "one name" in table.copy_reason
    assert not os.path.islink(source) and os.stat(source).st_nlink == 2, "the fork's file was put back untouched"
    assert pending_promotions(env.config, "prod", "main") == []


def test_a_file_reached_through_a_linked_folder_is_not_moved(embedded_lake, tmp_path):
    """A fork that links its table folder to files elsewhere cannot make the parent adopt them."""
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    [source] = table_files(env, FORK)
    schema_folder = os.path.dirname(os.path.dirname(source))  # <fork data>/main: above the table folder
    elsewhere = tmp_path / "elsewhere"
    os.rename(schema_folder, elsewhere)
    os.symlink(elsewhere, schema_folder)
    table = promoted(env)
    assert table.method == "copied" and "through a link" in table.copy_reason
    assert os.path.isfile(elsewhere / "orders" / os.path.basename(source)), "the file elsewhere was not taken"


def test_copy_only_and_a_rolled_back_move_leave_the_fork_as_it_was(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    diff_id = reviewed(env)
    [source] = table_files(env, FORK)
    before = fingerprint(env)

    def fail(name):
        raise RuntimeError("injected failure inside the transaction")

    with pytest.raises(RuntimeError):
        promote(FORK, ["orders"], diff_id, config=env.config, ports=PromotePorts(after_copy=fail))
    assert fingerprint(env) == before, "prod byte-identical"
    assert os.path.isfile(source) and not os.path.islink(source), "the file is back in the fork"
    assert pending_promotions(env.config, "prod", "main") == []
    table = promoted(env, diff_id, copy_only=True)
    assert (table.method, table.copy_reason) == ("copied", "copy requested")


@pytest.fixture
def plain_lake(tmp_path):
    """A bare DuckLake with data inlining on (the managed test lakes turn it off)."""
    from dpone_dagster.lake.duck import connect

    conn = connect()
    conn.execute(
        f"ATTACH 'ducklake:{tmp_path}/f.ducklake' AS f (DATA_PATH '{tmp_path}/data/', DATA_INLINING_ROW_LIMIT 10)"
    )
    yield conn
    conn.close()


def plan_of(conn, table: str):
    from dpone_dagster.lake.lifecycle.promote_files import metadata_prefix, plan_table
    from dpone_dagster.lake.resolution.plan import TableName

    return plan_table(conn, "f", metadata_prefix("f", None), TableName("main", table), None)


@pytest.mark.parametrize(
    ("statements", "reason"),
    [
        (["CREATE TABLE f.t AS SELECT range AS id FROM range(100)"], None),
        (["CREATE TABLE f.t AS SELECT range AS id FROM range(100)", "INSERT INTO f.t VALUES (1)"], "inlined rows"),
        (["CREATE TABLE f.t AS SELECT range AS id FROM range(100)", "DELETE FROM f.t WHERE id = 3"], "inlined rows"),
        (
            [
                "CREATE TABLE f.t AS SELECT range AS id FROM range(100)",
                "INSERT INTO f.t VALUES (1000)",
                "DELETE FROM f.t WHERE id = 3",
            ],
            "inlined rows",
        ),  # as many rows as the file holds, not its rows
        (
            ["CREATE TABLE f.t AS SELECT range AS id FROM range(100)", "ALTER TABLE f.t ADD COLUMN x INT"],
            "columns changed",
        ),
        (["CREATE TABLE f.t (id BIGINT)"], "empty table"),
        (["CREATE TABLE f.s AS SELECT range AS id FROM range(100)", "CREATE VIEW f.t AS SELECT * FROM f.s"], "a view"),
    ],
    ids=["plain", "inlined-insert", "inlined-delete", "balanced", "added-column", "empty", "view"],
)
def test_only_files_that_carry_exactly_the_tables_rows_move(plain_lake, statements, reason):
    for statement in statements:
        plain_lake.execute(statement)
    plan = plan_of(plain_lake, "t")
    if reason is None:
        assert plan.moves and plan.rows == 100 and len(plan.files) == 1
    else:
        assert not plan.moves and reason in plan.copy_reason and plan.files == ()


def test_storage_that_a_move_cannot_cross_is_named():
    from dpone_dagster.config import StorageConfig
    from dpone_dagster.lake.lifecycle.promote_files import storage_reason

    here = StorageConfig(endpoint="s3.example:9000")
    assert storage_reason("s3://b/__wm_forks/x/", "s3://b/lakes/main/", here, here) is None
    assert "bucket" in storage_reason("s3://a/__wm_forks/x/", "s3://b/lakes/main/", here, here)
    assert "endpoint" in storage_reason("s3://b/__wm_forks/x/", "s3://b/lakes/main/", here, StorageConfig())
    assert "not both" in storage_reason("/tmp/__wm_forks/x/", "s3://b/lakes/main/", None, here)
