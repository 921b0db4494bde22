"""dbt in a fork, confined: the dbt doors of issue 19 are refused, a full fork dbt build succeeds.

`dbt_doors/` is a dbt project whose profile uses the dpone plugin *without* its SQL guard
(`door_plugin.py`), so what stops a door is the kernel: a `pre_hook` COPY onto a prod data file, an
`external` materialization into prod's data folder, a dbt python model doing `os.remove` on a prod
data file. Its `own_table` model is the fork's own write and must succeed. With
`DPONE_TEST_CONFINEMENT=off` the doors succeed and these tests go red.

The second test builds `dbt_project_synthetic` in prod (unconfined), then the whole project again
in a fork through the launcher, with the real (guarded) plugin: everything a fork's dbt build
writes (its catalog folder, data prefix, dbt target and log folders, the control store) is allowed.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from dpone_dagster.integration.dbt.project import dbt_executable
from dpone_dagster.workspaces.dagster_home import workspace_segment

from .harness import FORK, REPO_ROOT, build_forked_state, last_json_line, needs_landlock, run_for_fork

pytestmark = needs_landlock

DOORS_PROJECT = Path(__file__).parent / "dbt_doors"
DOOR_MODELS = ("pre_hook_door", "external_door", "python_door")


def _dbt_paths(state_dir: Path) -> dict[str, str]:
    """The fork's own dbt folders: where the launcher points dbt, given explicitly for unconfined runs too."""
    own = state_dir / "workspaces" / workspace_segment(FORK) / "dbt"
    return {"DBT_TARGET_PATH": str(own / "target"), "DBT_LOG_PATH": str(own / "logs")}


def _results(target: str) -> dict[str, dict]:
    results = json.loads((Path(target) / "run_results.json").read_text())["results"]
    return {r["unique_id"].split(".")[-1]: {"status": r["status"], "message": r.get("message") or ""} for r in results}


# dbt run by the pre-imported dbt a run's process starts (`integration/dbt/prewarm.py`): the process under
# the launcher starts the server, whose forked dbt must be bound by the same confinement
PREWARMED = """
import json, subprocess, sys
from dpone_dagster.integration.dbt import prewarm
client = prewarm.start(sys.argv[1])
process = subprocess.Popen([client, *sys.argv[2:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
out, _ = process.communicate()
pids = set()
for line in out.splitlines():
    try:
        pids.add(json.loads(line)["info"]["pid"])
    except (ValueError, KeyError):
        pass
print(out[-3000:])
print(json.dumps({"returncode": process.returncode, "client_pid": process.pid, "dbt_pids": sorted(pids)}))
"""


@pytest.fixture(scope="module", params=["dbt", "prewarmed"])
def dbt_doors_run(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("dbt_doors")
    forked = build_forked_state(root / "state")
    project = Path(shutil.copytree(DOORS_PROJECT, root / "dbt_doors"))
    before = forked.fingerprint()
    paths = _dbt_paths(forked.state_dir)
    env = forked.env(
        DOOR_PROD_FILE=str(forked.prod_file), DOOR_PROD_DIR=str(forked.prod_data), PYTHONPATH=str(project), **paths
    )
    dbt_run = ["run", "--profiles-dir", str(project)]
    if request.param == "dbt":
        done = run_for_fork([dbt_executable(), *dbt_run], env, cwd=project)
    else:
        command = [sys.executable, "-c", PREWARMED, dbt_executable(), *dbt_run, "--log-format", "json"]
        done = run_for_fork(command, env, cwd=project)
        report = last_json_line(done.stdout)
        assert report["returncode"] != 0, done.stdout[-3000:] + done.stderr[-2000:]  # the doors failed
        assert report["dbt_pids"] and report["client_pid"] not in report["dbt_pids"], report  # a forked dbt ran
    return forked, before, _results(paths["DBT_TARGET_PATH"]), done


@pytest.mark.parametrize("model", DOOR_MODELS)
def test_a_dbt_door_to_the_parents_files_fails_with_permission_denied(dbt_doors_run, model):
    forked, before, results, _ = dbt_doors_run
    assert results[model]["status"] == "error", results[model]
    assert "Permission denied" in results[model]["message"], results[model]["message"][-500:]
    assert forked.fingerprint() == before


def test_the_forks_own_dbt_model_builds_and_prod_stays_byte_identical(dbt_doors_run):
    forked, before, results, done = dbt_doors_run
    assert results["own_table"]["status"] == "success", done.stdout[-3000:]
    assert forked.fingerprint() == before
    assert not (forked.prod_data / "external_door.parquet").exists()


def test_a_full_fork_dbt_build_succeeds_confined(tmp_path):
    """The synthetic project built in prod, then built again, whole, in the fork under the launcher."""
    forked = build_forked_state(tmp_path / "state")
    project = REPO_ROOT / "dbt_project_synthetic"
    dbt = [dbt_executable(), "build", "--profiles-dir", str(project)]
    prod = {
        "DBT_TARGET_PATH": str(tmp_path / "prod_dbt" / "target"),
        "DBT_LOG_PATH": str(tmp_path / "prod_dbt" / "logs"),
    }
    built = run_for_fork(dbt, forked.env(workspace=None, **prod), cwd=project, confined=False)
    assert built.returncode == 0, built.stdout[-3000:]
    before = forked.fingerprint()
    paths = _dbt_paths(forked.state_dir)
    in_fork = run_for_fork(dbt, forked.env(**paths), cwd=project)
    assert in_fork.returncode == 0, in_fork.stdout[-4000:] + in_fork.stderr[-2000:]
    results = _results(paths["DBT_TARGET_PATH"])
    assert len(results) > 20 and {r["status"] for r in results.values()} <= {"success", "pass"}, results
    assert forked.fingerprint() == before
    fork_files = list((forked.state_dir / "lakes" / "storage" / "__wm_forks").rglob("*.parquet"))
    assert fork_files, "the fork's build wrote no data file under its own prefix"
