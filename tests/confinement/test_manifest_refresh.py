"""A confined fork process prepares the dbt manifest after a model edit, in its own dbt target folder.

A fork's processes (`dpone dev` in a fork: code server, run workers, the dbt op) cannot write the
dbt project's folder: Landlock leaves it read-only, and the launcher points `DBT_TARGET_PATH` at the
fork's own `dbt/target`. Before this test, the manifest was always prepared in the project's own
`target/`, so the first run after a model edit failed in the fork (the refresh could not take its
lock file there), and so did a reload of the location. Now a `DbtProject` follows `DBT_TARGET_PATH`
as dbt itself does; the project's `target/` stays byte-identical.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from dpone_dagster.workspaces.dagster_home import workspace_segment

from .harness import FORK, REPO_ROOT, base_env, build_forked_state, last_json_line, needs_landlock, run_for_fork

pytestmark = needs_landlock

REFRESH = """
import json
from pathlib import Path
from dpone_dagster.integration.dbt.project import dbt_project_at, prepare_manifest
project = dbt_project_at({project!r})
assert prepare_manifest(project)  # the location loaded again after the edit: it parses
manifest = json.loads(project.manifest_path.read_text())
node = manifest["nodes"].get("model.dbt_project_synthetic.daily_revenue")
edited = bool(node and "-- edited in the fork" in node["raw_code"])
print(json.dumps({{"manifest": str(project.manifest_path), "edited": edited}}))
"""


def _tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_confined_fork_refreshes_the_manifest_in_its_own_target_after_an_edit(tmp_path):
    forked = build_forked_state(tmp_path / "state")
    project = Path(
        shutil.copytree(
            REPO_ROOT / "dbt_project_synthetic", tmp_path / "project", ignore=shutil.ignore_patterns("target", "logs")
        )
    )
    prepared = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from dpone_dagster.integration.dbt.project import dbt_project_at, prepare_manifest; "
                f"prepare_manifest(dbt_project_at({str(project)!r}))"
            ),
        ],
        cwd=project,
        env=base_env(forked.state_dir),
        capture_output=True,
        text=True,
    )
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    before = _tree_digest(project / "target")
    model = next(project.rglob("daily_revenue.sql"))
    model.write_text(model.read_text() + "\n-- edited in the fork\n")

    done = run_for_fork([sys.executable, "-c", REFRESH.format(project=str(project))], forked.env(FORK), cwd=project)

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = last_json_line(done.stdout)
    assert report["edited"], report
    own_target = forked.state_dir / "workspaces" / workspace_segment(FORK) / "dbt" / "target"
    assert Path(report["manifest"]).parent == own_target, report
    assert _tree_digest(project / "target") == before
