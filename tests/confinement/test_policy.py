"""What a fork's process may write, computed from the configuration (no Landlock needed here).

The policy grants the fork's own catalog folder and data prefix, its own folder (Dagster home, dbt
target/logs), a private temp folder and the control store's folder; it refuses to grant a folder
that contains a parent's file (a fork catalog made beside the parent's, a control store or a
Dagster home above the lakes), and a private temp folder someone else could have made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dpone_dagster.config import load_config
from dpone_dagster.confinement.policy import (
    ForkCatalogBesideParentError,
    UnsafeTempDirError,
    WritableCoversParentError,
    fork_policy,
    prepare_policy,
)
from dpone_dagster.confinement.status import MARKER_ENV
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.fork_catalog import fork_catalog_location
from dpone_dagster.lake.resolution.naming import fork_catalog_file, legacy_fork_catalog_file
from dpone_dagster.workspaces.dagster_home import private_temp_dir
from dpone_dagster.workspaces.service import Workspaces

from .harness import FORK

STEM = "wm_fork_wm_fork_x_main_0123abcd"


def test_golden_fork_catalog_files():
    """Persisted: never change these outputs for these inputs (the ledger and cleanup rely on them)."""
    assert fork_catalog_file("/s/lakes/main.ducklake", STEM) == f"/s/lakes/{STEM}/{STEM}.ducklake"
    assert legacy_fork_catalog_file("/s/lakes/main.ducklake", STEM) == f"/s/lakes/{STEM}.ducklake"


def test_a_fork_catalog_made_beside_the_parent_stays_there(tmp_path):
    base = CatalogLocation("duckdb", str(tmp_path / "main.ducklake"))
    assert fork_catalog_location(base, STEM).target == str(tmp_path / STEM / f"{STEM}.ducklake")
    (tmp_path / f"{STEM}.ducklake").write_bytes(b"")
    assert fork_catalog_location(base, STEM).target == str(tmp_path / f"{STEM}.ducklake")


@pytest.fixture
def fork_config(_isolated_state, monkeypatch):
    reset_store_cache()
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    config = load_config()
    yield config
    shutil.rmtree(private_temp_dir(config, config.workspace), ignore_errors=True)


def _inside(path: Path, tree: Path) -> bool:
    return path == tree or tree in path.parents


def test_prod_is_never_confined():
    assert fork_policy(load_config(), {}) is None


def test_a_fork_writes_its_own_trees_and_nothing_that_holds_a_parents_file(fork_config):
    policy = fork_policy(fork_config, {})
    state = fork_config.state_path
    lakes = state / "lakes"
    own_catalog = [t for t in policy.trees if t.parent == lakes]
    assert len(own_catalog) == 1 and own_catalog[0].name.startswith("wm_fork_")
    assert any(t.parent == lakes / "storage" / "__wm_forks" for t in policy.trees)
    assert state / "workspaces" / FORK in policy.trees
    assert state / "control" in policy.trees
    assert private_temp_dir(fork_config, fork_config.workspace) in policy.trees
    assert {lakes / "main.ducklake", lakes / "storage" / "main"} <= set(policy.protected)
    for path in policy.protected:
        assert not any(_inside(path, tree) for tree in policy.trees), path
    assert policy.env["TMPDIR"] == str(private_temp_dir(fork_config, fork_config.workspace))
    assert policy.env["DBT_TARGET_PATH"].startswith(str(state / "workspaces" / FORK))
    assert policy.env[MARKER_ENV] == FORK


def test_prepare_creates_every_folder_and_registers_the_forks_places(fork_config):
    policy = fork_policy(fork_config, {})
    prepare_policy(policy, fork_config)
    assert all(t.is_dir() for t in policy.trees if not str(t).startswith("/dev/"))
    assert private_temp_dir(fork_config, fork_config.workspace).stat().st_mode & 0o077 == 0
    assert {rule.path for rule in policy.rules() if not rule.is_file} == {t for t in policy.trees if t.is_dir()}
    from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
    from dpone_dagster.control.store import open_store

    with open_store(fork_config.control_store).connect() as conn:
        rows = conn.execute(ledger.select().where(ledger.c.workspace_id == FORK)).all()
    assert len(rows) == 1


def test_a_fork_catalog_beside_the_parents_cannot_be_confined(fork_config):
    view_stem = next(t for t in fork_policy(fork_config, {}).trees if t.parent.name == "lakes").name
    lakes = fork_config.state_path / "lakes"
    lakes.mkdir(parents=True, exist_ok=True)
    (lakes / f"{view_stem}.ducklake").write_bytes(b"")  # a fork catalog made before folders
    with pytest.raises(ForkCatalogBesideParentError) as caught:
        fork_policy(fork_config, {})
    assert caught.value.code == "confinement.fork_catalog_beside_parent"


def test_a_control_store_beside_the_lakes_cannot_be_granted(fork_config):
    (fork_config.state_path / "control.sqlite").write_bytes(b"")  # a state dir made before the folder
    legacy = load_config()
    assert legacy.control_store_file == legacy.state_path / "control.sqlite"
    with pytest.raises(WritableCoversParentError) as caught:
        fork_policy(legacy, {})
    assert caught.value.code == "confinement.writable_covers_parent"


def test_a_dagster_home_above_the_lakes_cannot_be_granted(fork_config):
    with pytest.raises(WritableCoversParentError):
        fork_policy(fork_config, {"DAGSTER_HOME": str(fork_config.state_path)})


def test_a_shared_lake_is_the_forks_to_write(_isolated_state, monkeypatch):
    reset_store_cache()
    Workspaces(load_config()).create_fork("wm-fork-shared", "prod", owner="alice", shared_lakes=["main"])
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-shared")
    config = load_config()
    policy = fork_policy(config, {})
    assert config.state_path / "lakes" in policy.trees
    assert not policy.own_places


def test_a_private_temp_folder_made_by_someone_else_is_refused(fork_config):
    policy = fork_policy(fork_config, {})
    temp = private_temp_dir(fork_config, fork_config.workspace)
    temp.mkdir(mode=0o700, exist_ok=True)
    os.chmod(temp, 0o777)
    try:
        with pytest.raises(UnsafeTempDirError):
            prepare_policy(policy, fork_config)
    finally:
        os.chmod(temp, 0o700)


def test_the_dbt_projects_partial_parse_file_is_carried_into_the_forks_target(fork_config, tmp_path):
    project = tmp_path / "project"
    (project / "target").mkdir(parents=True)
    (project / "target" / "partial_parse.msgpack").write_bytes(b"parsed once")
    config = fork_config.model_copy(update={"dbt_project_dir": project})
    policy = fork_policy(config, {})
    prepare_policy(policy, config)
    carried = Path(policy.env["DBT_TARGET_PATH"]) / "partial_parse.msgpack"
    assert carried.read_bytes() == b"parsed once"
