"""Loading an adopted project's code location imports none of dpone's lake services (issue 18, the load row).

A location load builds assets, checks, jobs, sensors and the `ducklake` resource; it runs none of
them. So the lake services (resolution, tracking, the control store and its SQLAlchemy tables,
DuckDB, the dbt-duckdb plugin) are imported when a run or check first uses them, not at load:
bench/bench_adoption.py measured the dg project's load at 1.3x a bare dagster-dbt location while
they were loaded. This test loads tests/fixtures/shop, adopted with `dpone init` as a dg project, in
a fresh interpreter and lists what it imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHOP = REPO_ROOT / "tests" / "fixtures" / "shop"
LOAD = """
import importlib, json, sys
import dagster as dg
from dagster.components.definitions import LazyDefinitions
module = importlib.import_module("shop.definitions")
(found,) = [v for v in vars(module).values() if isinstance(v, (dg.Definitions, LazyDefinitions))]
defs = found() if isinstance(found, LazyDefinitions) else found
repository = defs.get_repository_def()
print(json.dumps({"modules": sorted(sys.modules), "assets": len(repository.assets_defs_by_key)}))
"""
SERVICES = (
    "sqlalchemy",
    "duckdb",
    "dpone_dagster.lake.state",
    "dpone_dagster.lake.lifecycle",
    "dpone_dagster.lake.resolution.seam",
    "dpone_dagster.control",
    "dpone_dagster.workspaces",
    "dpone_dagster.lake.dbt_plugin",
)


def test_an_adopted_location_loads_without_the_lake_services(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_"))}
    dpone = Path(sys.executable).with_name("dpone")
    done = subprocess.run([str(dpone), "init"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    env["PYTHONPATH"] = str(root)
    done = subprocess.run([sys.executable, "-c", LOAD], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["assets"] >= 4  # the shop's seeds and models are there
    imported = [m for m in loaded["modules"] if m.startswith(SERVICES)]
    assert imported == [], f"a location load imported lake services: {imported[:12]}"
