"""What an adopter imports never loads this repository's own code location or dbt project.

Every module of `dpone_dagster.integration` is imported in a fresh interpreter whose project root
(`DPONE_PROJECT_ROOT`, and the current directory) is an empty folder, with an audit hook that
records every file opened and every folder listed. Afterwards no `dpone_dagster.defs*` module (nor
`dpone_dagster.definitions`) may be in `sys.modules`, and nothing of a `dbt_project_synthetic` folder
(the repository's, or the one the configuration's default `dbt_project_dir` would name under the
empty root) may have been opened or listed.

`dg list components`, run in an empty folder with no dpone.yaml above it and no `DPONE_PROJECT_ROOT`,
lists `ForkAwareDbtProjectComponent` through the `dagster_dg_cli.registry_modules` entry point: installing
dpone-dagster must never break `dg` for the environment (issue 18).

What a reader could get wrong: the entry point `dg` reads is the *installed* one (the dist-info of
the editable install), not pyproject.toml's; after pyproject.toml changes it, `make install` must
run again. The test says so instead of failing on a stale install with dg's error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import dpone_dagster

PACKAGE_ROOT = Path(dpone_dagster.__file__).resolve().parent
REPO_ROOT = PACKAGE_ROOT.parent
ENTRY_POINT_GROUP = "dagster_dg_cli.registry_modules"

_PROBE = """
import importlib, json, os, sys

touched = []

def _record(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        touched.append(os.fsdecode(args[0]))

sys.addaudithook(_record)
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
loaded = sorted(
    m for m in sys.modules if m.split(".")[:2] in (["dpone_dagster", "defs"], ["dpone_dagster", "definitions"])
)
print(json.dumps({"loaded": loaded, "touched": touched}))
"""


def integration_modules() -> list[str]:
    """Every module of the integration package, found on disk (nothing imported here)."""
    root = PACKAGE_ROOT / "integration"
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_CLOUD_"))}
    env.update(extra)
    return env


def test_importing_the_integration_package_loads_no_code_location_and_reads_no_dbt_project(tmp_path):
    modules = integration_modules()
    assert {
        "dpone_dagster.integration",
        "dpone_dagster.integration.dbt.factory",
        "dpone_dagster.integration.dbt.component",
        "dpone_dagster.integration.dbt.translator",
        "dpone_dagster.integration.dbt.partitioned",
        "dpone_dagster.integration.lake.definitions",
        "dpone_dagster.integration.binding",
    } <= set(modules)
    empty = tmp_path / "empty_project"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-P", "-c", _PROBE, json.dumps(modules)],  # -P: the empty folder is not on sys.path
        cwd=empty,
        env=_clean_env(DPONE_PROJECT_ROOT=str(empty), DPONE_STATE_DIR=str(tmp_path / "state")),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert [p for p in report["touched"] if "dbt_project_synthetic" in p] == []
    assert [p for p in report["touched"] if Path(p).resolve().is_relative_to(empty)] == []
    assert not (tmp_path / "state").exists(), "importing the integration package created dpone state"


def test_the_dg_registry_entry_point_is_the_integration_component_module():
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    target = declared["project"]["entry-points"][ENTRY_POINT_GROUP]["dpone_dagster"]
    assert target == "dpone_dagster.integration.dbt.component"
    installed = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert installed.get("dpone_dagster") == target, (
        "the installed entry point differs from pyproject.toml: run `make install` (the editable install's "
        f"metadata is stale: {installed.get('dpone_dagster')!r})"
    )


@pytest.mark.parametrize("project_root", ["unset", "empty"])
def test_dg_list_components_works_in_an_empty_folder_without_a_dpone_project(tmp_path, project_root):
    """`unset`: no DPONE_PROJECT_ROOT (an editable install may still fall back to this repository, a
    config rule); `empty`: DPONE_PROJECT_ROOT names the empty folder, as an installed wheel has no
    repository to fall back to, so a component module that needed a dbt project would fail here."""
    assert not any((folder / "dpone.yaml").exists() for folder in (tmp_path, *tmp_path.parents))
    dg = Path(sys.executable).with_name("dg")
    root = {"DPONE_PROJECT_ROOT": str(tmp_path)} if project_root == "empty" else {}
    done = subprocess.run(
        [str(dg), "list", "components", "--json"],
        cwd=tmp_path,
        env=_clean_env(HOME=str(tmp_path), COLUMNS="250", **root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    listed = {entry["key"] for entry in json.loads(done.stdout)["items"]}
    assert "dpone_dagster.integration.dbt.component.ForkAwareDbtProjectComponent" in listed, sorted(listed)[:20]
    assert "Error loading entry point" not in done.stderr
