"""The code location loads, and its asset graph matches the checked-in snapshot.

The snapshot (`tests/definitions_snapshot.json`) lists every asset key with its group and upstream
keys, every asset check, job, sensor, schedule and resource key, so an accidental change to the
graph shows up in review. After an intended change, regenerate it with
`DPONE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_definitions_smoke.py` and commit it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")
REPO_ROOT = Path(__file__).resolve().parent.parent


def _graph() -> dict:
    from dpone_dagster.definitions import defs

    graph = defs.resolve_asset_graph()
    repository = defs.get_repository_def()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "deps": sorted(parent.to_user_string() for parent in node.parent_keys),
        }
    checks = sorted(f"{c.asset_key.to_user_string()}:{c.name}" for c in graph.asset_check_keys)
    return {
        "assets": assets,
        "checks": checks,
        "jobs": sorted(j.name for j in repository.get_all_jobs() if not j.name.startswith("__")),
        "sensors": sorted(s.name for s in repository.sensor_defs),
        "schedules": sorted(s.name for s in repository.schedule_defs),
        "resources": sorted(repository.get_top_level_resources()),
    }


def test_definitions_match_the_snapshot():
    current = _graph()
    if os.environ.get("DPONE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert current == expected


def test_dbt_assets_are_grouped_and_checked():
    graph = _graph()
    dbt_assets = {key for key, node in graph["assets"].items() if node["group"] == "synthetic_dbt"}
    assert "main/marts/fct_orders" in dbt_assets
    assert graph["assets"]["main/marts/fct_orders"]["deps"] == ["main/staging/stg_orders", "main/staging/stg_payments"]
    checked = {check.split(":")[0] for check in graph["checks"]}
    assert dbt_assets <= checked
    assert {"dbt", "ducklake"} <= set(graph["resources"])


def test_workspace_yaml_validates_with_the_dagster_cli(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("", encoding="utf-8")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "All code locations passed validation" in done.stdout + done.stderr


def test_outside_a_branch_deployment_the_load_does_not_import_the_branch_fork_code(tmp_path):
    """Load-time cost pinned: `workspaces.branch` (fork creation, git, the control-store service) is
    imported only in a Dagster+ branch deployment; elsewhere the location and every run worker paid
    ~0.2 s of CPU for it (bench_scale at 1,000 models)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_CLOUD_", "DPONE_WORKSPACE"))}
    env["DPONE_STATE_DIR"] = str(tmp_path)
    code = "import sys, dpone_dagster.definitions; print('dpone_dagster.workspaces.branch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
