"""A generated 1,000-model dbt project (bench/generator.py) as the dpone code location, and a fork job on it.

Both tests run the location in a child process: `dpone_dagster.defs.dbt.assets` binds its dbt project
when imported, so the generated project must be the configured one (`DPONE_PROJECT_ROOT`) from the
start. The module fixture generates the project and prepares its manifest once (one `dbt parse`,
about 20 s of CPU at 1,000 models; `SCALE_TEST_MODELS` overrides the size).

- load: every dbt node is an asset of the location (assets == models, plus the location's own
  non-dbt assets) and every `unique`/`not_null` test is an asset check;
- fork job: prod builds only the probe model's upstream closure (building all 1,000 models would
  measure dbt, not the fork); a fork then materializes the probe alone. It builds in the fork
  (fork_materialized, the fork's namespace), its 5 upstream tables are defer views reading prod's
  rows, and prod is unchanged (same snapshot, the probe absent there).

What a reader could get wrong: the dbt-facing numbers (models, parents) come from the generator's
summary, never from the location, so a location that lost nodes or checks cannot agree with itself.
"""

from __future__ import annotations

import json
import os

import pytest

from bench.bench_scale import child_env, prepare, run_child
from bench.generator import generate, load_summary

pytestmark = pytest.mark.slow

MODELS = int(os.environ.get("SCALE_TEST_MODELS", 1000))
SEED = 11
FORK = "wm-fork-scale-test"

_LOAD = """
import json
from dpone_dagster.definitions import defs
from dpone_dagster.defs.dbt.translator import GROUP_NAME
graph = defs.get_repository_def().asset_graph
dbt_keys = [k for k in graph.get_all_asset_keys() if graph.get(k).group_name == GROUP_NAME]
checks = [c for c in graph.asset_check_keys if c.asset_key in set(dbt_keys)]
print(json.dumps({"dbt_assets": sorted("/".join(k.path) for k in dbt_keys),
                  "check_names": sorted(f"{'/'.join(c.asset_key.path)}:{c.name}" for c in checks)}))
"""

_FORK_JOB = """
import json, os, sys
from dagster import AssetKey, materialize
from dpone_dagster.config import load_config
from dpone_dagster.definitions import defs
from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets
from dpone_dagster.lake import duck
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

upstream, probe, fork = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
key = lambda table: AssetKey(["main", *table.split(".")])


def build(tables):
    result = materialize([synthetic_dbt_assets], resources=dict(defs.resources or {}),
                         selection=[key(t) for t in tables], raise_on_error=False)
    events = result.get_asset_materialization_events()
    if not result.success:
        failures = [str(e.event_specific_data.error.message)[-1500:] for e in result.get_step_failure_events()]
        print(json.dumps({"failed_build": tables, "failures": failures}))
        sys.exit(0)
    kept = ("workspace", "fork_state", "namespace")
    return result.success, {
        e.asset_key.to_user_string(): {k: v.value for k, v in e.materialization.metadata.items() if k in kept}
        for e in events
    }


def read(workspace, sqls):
    conn = duck.connect()
    try:
        resolve(workspace, config=load_config()).apply(conn)
        return [conn.execute(sql).fetchall() for sql in sqls]
    finally:
        conn.close()


KINDS = ("SELECT table_schema || '.' || table_name, table_type FROM information_schema.tables "
         "WHERE table_catalog = 'lake_main'")
SNAPSHOT = "SELECT max(snapshot_id) FROM lake_main.snapshots()"
prod_ok, _ = build(upstream)
parents = json.loads(sys.argv[4])
before = read("prod", [SNAPSHOT, KINDS])
Workspaces(load_config()).create_fork(fork, "prod", owner="tester")
os.environ["DPONE_WORKSPACE"] = fork
fork_ok, fork_events = build([probe])
fork_kinds, probe_rows, first_parent_rows = read(fork, [KINDS, f"SELECT count(*) FROM lake_main.{probe}",
                                                        f"SELECT count(*) FROM lake_main.{parents[0]}"])
del os.environ["DPONE_WORKSPACE"]
after = read("prod", [SNAPSHOT, KINDS, f"SELECT count(*) FROM lake_main.{parents[0]}"])
print(json.dumps({
    "prod_ok": prod_ok, "fork_ok": fork_ok, "fork_events": fork_events,
    "fork_kinds": dict(fork_kinds), "probe_rows": probe_rows[0][0], "fork_first_parent_rows": first_parent_rows[0][0],
    "prod_snapshot_before": before[0][0][0], "prod_snapshot_after": after[0][0][0],
    "prod_tables_before": sorted(r[0] for r in before[1]), "prod_tables_after": sorted(r[0] for r in after[1]),
    "prod_first_parent_rows": after[2][0][0],
}))
"""


@pytest.fixture(scope="module")
def scale_project(tmp_path_factory):
    base = tmp_path_factory.mktemp("scale")
    root = generate(MODELS, 0, SEED, base=base)
    env = child_env(root, base / "state")
    prepare(root, env)
    return root, env


def test_the_generated_project_loads_as_a_code_location_with_every_model_and_check(scale_project):
    root, env = scale_project
    summary = load_summary(root)
    loaded = run_child(_LOAD, env, timeout=1800)
    expected = sorted(f"main/{node['table'].replace('.', '/')}" for node in summary["nodes"])
    assert len(loaded["dbt_assets"]) == MODELS
    assert loaded["dbt_assets"] == expected
    expected_checks = sorted(
        f"{asset}:{test}_{asset.rsplit('/', 1)[1]}_id" for asset in expected for test in ("not_null", "unique")
    )
    dbt_tests = [name for name in loaded["check_names"] if name.split(":")[1].startswith(("unique_", "not_null_"))]
    assert dbt_tests == expected_checks  # other checks (e.g. fork staleness) may ride along


def _closure(nodes: dict, name: str) -> set[str]:
    out: set[str] = set()
    for parent in nodes[name]["parents"]:
        out |= {parent} | _closure(nodes, parent)
    return out


def test_a_fork_job_builds_one_model_reading_prod_upstream_through_defer_views(scale_project, tmp_path):
    root, env = scale_project
    summary = load_summary(root)
    nodes = {node["name"]: node for node in summary["nodes"]}
    probe = nodes[summary["probe"]]
    upstream = sorted(nodes[name]["table"] for name in _closure(nodes, probe["name"]))
    parents = [nodes[name]["table"] for name in probe["parents"]]
    out = run_child(_FORK_JOB, env, json.dumps(upstream), probe["table"], FORK, json.dumps(parents), timeout=1800)
    assert "failed_build" not in out, out

    assert out["prod_ok"] and out["fork_ok"]
    probe_key = f"main/{probe['table'].replace('.', '/')}"
    assert list(out["fork_events"]) == [probe_key]
    metadata = out["fork_events"][probe_key]
    assert metadata["workspace"] == FORK and metadata["fork_state"] == "fork_materialized"
    assert metadata["namespace"].startswith("wm_fork_")
    kinds = out["fork_kinds"]
    assert kinds[probe["table"]] == "BASE TABLE"
    assert len(parents) == 5 and all(kinds[table] == "VIEW" for table in parents)
    # Upstream reads prod's rows: the probe left-joins onto its first parent's ids.
    assert out["probe_rows"] == out["fork_first_parent_rows"] == out["prod_first_parent_rows"] > 0
    # Prod is unchanged: no new snapshot, the same tables, and the probe never built there.
    assert out["prod_snapshot_after"] == out["prod_snapshot_before"]
    assert out["prod_tables_after"] == out["prod_tables_before"] == upstream
    assert probe["table"] not in out["prod_tables_after"]
