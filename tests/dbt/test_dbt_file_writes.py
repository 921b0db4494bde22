"""Issue 19 #5 and #6 through real dbt runs in a fork: a `pre_hook` that COPYs over a parent data file
and an `external` model located in the parent's data folder are refused by the SQL guard (dbt
sends both as `COPY … TO` through the guarded cursor); the parent's files stay byte-identical; an
`external` model located in the fork's own prefix works.

A throwaway dbt project in `tmp_path` uses the synthetic project's profile (the dpone plugin), so
the run resolves, attaches and guards exactly like the code location's dbt runs. dbt *python*
models are user Python: no SQL guard can see them (kernel confinement covers them,
`tests/confinement/`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup

FORK = "wm-fork-dbt-files"
CODE = "lake.file_write_outside_namespace"


def _files(folder: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__wm_forks" not in p.parts
    }


def _project(root: Path, parent_file: str, parent_folder: str) -> Path:
    project = root / "h6_files_project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: h6_files\nversion: '1.0'\nprofile: dbt_project_synthetic\nmodel-paths: ['models']\n"
    )
    (project / "models" / "hooked.sql").write_text(
        "{{ config(materialized='table', pre_hook=\"COPY (SELECT 42 AS id) TO '"
        + parent_file + "' (FORMAT parquet)\") }}\nselect 1 as id\n"
    )  # fmt: skip
    (project / "models" / "external_in_parent.sql").write_text(
        "{{ config(materialized='external', location='"
        + parent_folder
        + "/main/external.parquet') }}\nselect 1 as id\n"
    )
    (project / "models" / "external_in_own.sql").write_text(
        "{{ config(materialized='external', location=var('own') ~ 'external.parquet') }}\nselect 2 as id\n"
    )
    return project


@pytest.mark.slow
def test_dbt_hooks_and_external_models_write_only_the_forks_own_prefix(tmp_path):
    from dpone_dagster.integration.dbt.project import dbt_executable
    from dpone_dagster.lake.resolution.seam import resolve
    from dpone_dagster.workspaces.service import Workspaces

    setup = LakeSetup(tmp_path / "state")
    with setup.applied():
        conn = setup.connect()
        conn.execute("CREATE TABLE lake_main.main.orders AS SELECT range AS id FROM range(5)")
        conn.close()
        Workspaces(setup.config()).create_fork(FORK, "prod", owner="tester")
        prod = resolve("prod", "main", config=setup.config())
        own = resolve(FORK, "main", config=setup.config()).data_path
    parent_folder = prod.data_path.rstrip("/")
    parent_file = next(p for p in _files(Path(parent_folder)) if p.endswith(".parquet"))
    project = _project(tmp_path, parent_file, parent_folder)
    before = _files(Path(parent_folder))

    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update(setup.env, DPONE_WORKSPACE=FORK, DBT_TARGET_PATH=str(tmp_path / "t"), DBT_LOG_PATH=str(tmp_path / "l"))

    def dbt_run(select: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [dbt_executable(), "run", "--select", select, "--vars", f"{{own: '{own}'}}",
             "--profiles-dir", str(DBT_PROJECT_DIR)],
            cwd=project, env=env, capture_output=True, text=True,
        )  # fmt: skip

    for model in ("hooked", "external_in_parent"):
        done = dbt_run(model)
        output = done.stdout + done.stderr
        assert done.returncode != 0 and CODE in output, output[-3000:]
        assert _files(Path(parent_folder)) == before, model
    done = dbt_run("external_in_own")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert (Path(own) / "external.parquet").is_file()
    assert _files(Path(parent_folder)) == before
