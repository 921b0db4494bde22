"""The synthetic family's own release: composed only from the pinned synthetic campaign the package ships,
and run in a DuckDB that cannot reach a file outside its lake (issue 20 item 1)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from devtools.pack_fixtures import campaign_digest, rewrite_packs
from dpone_dagster.confinement.landlock import abi_version
from dpone_dagster.contracts.flows import FlowError
from dpone_dagster.release.runtime.ports import RuntimePortError, SandboxWriter
from dpone_dagster.release.runtime.sandbox import (
    SANDBOX_SETTINGS,
    SandboxRun,
    run_sandboxed,
    sandbox_connection,
    sandbox_settings,
)
from dpone_dagster.release.runtime.synthetic_campaign import (
    SYNTHETIC_SOURCE_DIGEST,
    compose_synthetic_release,
    install_synthetic_campaign,
    shipped_source,
)
from dpone_dagster.release.runtime.synthetic_release import SyntheticReleaseError, SyntheticReleaseStore
from dpone_dagster.release.source.snapshot import open_source

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = ("customer_order_counts", "daily_revenue", "status_funnel")


def _compose(root: Path, **pin: str):
    with open_source(root) as tree:
        return compose_synthetic_release(tree, **pin)


def test_the_shipped_campaign_is_pinned_and_its_packs_are_current() -> None:
    with shipped_source() as path:
        assert rewrite_packs(path, check=True) == []
        assert campaign_digest(path) == SYNTHETIC_SOURCE_DIGEST
        bundle = _compose(path)
    assert tuple(w.pack_id for w in bundle.ordinary) == CAMPAIGN
    assert bundle.parent.data_class == "synthetic" and bundle.parent.purpose == "synthetic_validation"
    with shipped_source() as path:
        assert _compose(path).release_id == bundle.release_id


def test_a_development_source_never_becomes_a_synthetic_release() -> None:
    with pytest.raises(SyntheticReleaseError) as refused:
        _compose(REPO / "dbt_project_synthetic")
    assert refused.value.code == "runtime.synthetic_source_unpinned"


def _campaign_with_line(tmp_path: Path, line: str) -> Path:
    """A copy of the shipped campaign with `line` appended to daily_revenue's SQL."""
    root = tmp_path / "campaign"
    with shipped_source() as path:
        shutil.copytree(path, root)
    sql = root / "flows/daily_revenue/sql/daily_revenue.sql"
    sql.write_text(sql.read_text() + line + "\n")
    return root


def test_an_edited_campaign_is_not_composed_until_it_is_pinned(tmp_path: Path) -> None:
    root = _campaign_with_line(tmp_path, "-- one more line")
    rewrite_packs(root, check=False)
    with pytest.raises(SyntheticReleaseError) as refused:
        _compose(root)
    assert refused.value.code == "runtime.synthetic_source_unpinned"
    assert _compose(root, pinned_digest=campaign_digest(root)).ordinary  # a platform that pins it gets it


def test_the_campaign_sql_goes_through_the_delivered_sql_reader(tmp_path: Path) -> None:
    root = _campaign_with_line(tmp_path, "select * from read_text('/etc/hostname');")
    with pytest.raises(FlowError) as refused:
        rewrite_packs(root, check=False)
    assert refused.value.code == "flows.sql_function_not_allowed"


def test_installing_the_campaign_twice_writes_once(tmp_path: Path) -> None:
    first = install_synthetic_campaign(tmp_path / "runtime")
    again = install_synthetic_campaign(tmp_path / "runtime")
    assert first.written and not again.written and first.release_id == again.release_id
    assert SyntheticReleaseStore(tmp_path / "runtime").load_current().release_id == first.release_id


# ---------------------------------------------------------------------------------------------
# the sandbox below the SQL


def test_a_sandbox_connection_reaches_only_its_lake_and_is_locked(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    with sandbox_connection(lake) as conn:
        settings = sandbox_settings(conn)
        assert {name: settings[name] for name in SANDBOX_SETTINGS} == SANDBOX_SETTINGS
        allowed = settings["allowed_directories"]
        assert all(entry.startswith(str(lake.resolve())) or entry.startswith(str(lake)) for entry in allowed), allowed
        with pytest.raises(duckdb.Error):
            conn.execute("SET enable_external_access = true")


def _writer(tmp_path: Path):
    with shipped_source() as path:
        bundle = _compose(path)
    workload = next(w for w in bundle.ordinary if w.pack_id == "daily_revenue")
    lake = tmp_path / "runtime" / "lake"
    lake.mkdir(parents=True)
    duckdb.connect(str(lake / "orders_source.duckdb")).close()
    return SandboxWriter(lake, workload), {"orders_source": "orders_source.duckdb", "flow_lake": "flow_lake.duckdb"}


ESCAPES = [
    "copy (select 42 as leaked) to '{outside}/leak.csv'",
    "attach '{outside}/leak.duckdb' as leak",
    "create table main.leaked as select * from read_text('{outside}/secret.txt')",
    "install httpfs",
    "set enable_external_access = true",
]


@pytest.mark.parametrize("statement", ESCAPES)
def test_sql_that_skipped_the_reader_cannot_leave_the_lake(tmp_path: Path, statement: str) -> None:
    """The floor below the reader: these statements are run as if capture had not checked them."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host data\n")
    sql = statement.format(outside=outside)
    with duckdb.connect() as plain:  # positive control: the same statement does escape without the sandbox
        if not sql.startswith(("install", "set")):
            plain.execute(sql)
    for leftover in ("leak.csv", "leak.duckdb"):
        (outside / leftover).unlink(missing_ok=True)
    writer, credentials = _writer(tmp_path)
    with pytest.raises(RuntimePortError) as refused:
        writer.run(None, credentials, [("sources/x/flows/daily_revenue/sql/daily_revenue.sql", sql.encode())])
    assert refused.value.code == "runtime.statement_failed"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


# ---------------------------------------------------------------------------------------------
# the kernel below DuckDB: the worker process is confined like a fork's

needs_landlock = pytest.mark.skipif(
    abi_version() < 1, reason="this kernel reports no Landlock ABI: nothing to prove here"
)


@needs_landlock
def test_the_worker_process_can_write_only_beneath_its_lake(tmp_path: Path) -> None:
    lake, outside = tmp_path / "lake", tmp_path / "outside"
    outside.mkdir()
    script = (
        "import sys; from pathlib import Path; from dpone_dagster.release.runtime.sandbox_worker import confine; "
        "assert confine(Path(sys.argv[1])); Path(sys.argv[2]).write_text('x')"
    )
    inside = subprocess.run(
        [sys.executable, "-c", script, str(lake), str(lake / "own.txt")], capture_output=True, check=False
    )
    assert inside.returncode == 0, inside.stderr.decode()[-300:]
    escape = subprocess.run(
        [sys.executable, "-c", script, str(lake), str(outside / "leak.txt")], capture_output=True, check=False
    )
    assert escape.returncode != 0 and b"PermissionError" in escape.stderr
    assert list(outside.iterdir()) == []


@needs_landlock
def test_a_synthetic_task_runs_kernel_confined(tmp_path: Path) -> None:
    writer, credentials = _writer(tmp_path)
    run = SandboxRun(
        str(writer.lake_dir),
        [("flow_lake", "flow_lake.duckdb", False)],
        "flow_lake",
        [("x.sql", "create table main.t as select 1 as a")],
        ["main.t"],
    )
    assert run_sandboxed(run) == {"statements": 1, "rows": {"main.t": 1}, "kernel_confined": True}
