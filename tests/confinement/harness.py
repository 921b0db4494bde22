"""Shared pieces of the confinement tests: a prod lake with a fork, prod's fingerprint, confined runs.

`ForkedState` is a state directory of its own (prod's `main` lake with one table of one data file,
and a fork `wm-fork-confined`), reached by subprocesses through `env()`. `run_for_fork()` runs a
command as a process acting for the fork: through the launcher (confined) unless the test switch
`DPONE_TEST_CONFINEMENT=off` is set, which is how each test is shown to go red without
confinement. The switch lives here, in the tests, never in the package.

What a reader could get wrong: confinement cannot be undone, so every door runs in a fresh
subprocess; the pytest process itself is never confined.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from dpone_dagster.config import load_config
from dpone_dagster.confinement.landlock import abi_version
from dpone_dagster.workspaces.dagster_home import private_temp_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
FORK = "wm-fork-confined"
CONFINED = os.environ.get("DPONE_TEST_CONFINEMENT", "on") != "off"
BIN = Path(sys.executable).parent
TEMP_DIRS: list[Path] = []
"""The private temp folders (`/tmp/dpone-<uid>-<hash>`) of the forks built here; removed at session end."""

needs_landlock = pytest.mark.skipif(
    abi_version() < 1, reason="landlock_create_ruleset reports no Landlock ABI on this kernel: nothing to prove here"
)


def base_env(state_dir: Path, workspace: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a process of this state dir (no inherited DPONE_*, DAGSTER_HOME or dbt paths)."""
    dropped = ("DPONE_", "DAGSTER_HOME", "DBT_TARGET_PATH", "DBT_LOG_PATH", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update({"DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": str(state_dir)})
    if workspace:
        env["DPONE_WORKSPACE"] = workspace
    env.update(extra)
    return env


@dataclass(frozen=True)
class ForkedState:
    state_dir: Path
    prod_catalog: Path
    prod_data: Path

    @property
    def prod_file(self) -> Path:
        files = sorted(self.prod_data.rglob("*.parquet"))
        assert files, "prod has no data file"
        return files[0]

    def env(self, workspace: str | None = FORK, **extra: str) -> dict[str, str]:
        return base_env(self.state_dir, workspace, **extra)

    def fingerprint(self) -> dict[str, str]:
        """sha256 of prod's catalog file and of every file under prod's data path (names included)."""
        files = [self.prod_catalog, *sorted(p for p in self.prod_data.rglob("*") if p.is_file())]
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def build_forked_state(state_dir: Path, tables: Sequence[str] = ("orders",)) -> ForkedState:
    """prod with `tables` (five rows each, one data file) and the fork, built in a subprocess."""
    script = (
        "import sys; sys.path.insert(0, 'tests/lake')\n"
        "from lakes import embedded_env, materialize\n"
        "from pathlib import Path\n"
        "from dpone_dagster.workspaces.service import Workspaces\n"
        f"env = embedded_env(Path({str(state_dir)!r}))\n"
        f"for table in {list(tables)!r}:\n"
        "    materialize(env, 'prod', table, 'SELECT range AS id FROM range(5)')\n"
        f"Workspaces(env.config).create_fork({FORK!r}, 'prod', owner='alice')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=base_env(state_dir), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lakes = state_dir / "lakes"
    TEMP_DIRS.append(private_temp_dir(load_config(base_env(state_dir, FORK)), FORK))
    return ForkedState(state_dir, lakes / "main.ducklake", lakes / "storage" / "main")


def run_for_fork(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path = REPO_ROOT,
    confined: bool = CONFINED,
    timeout: int = 900,
) -> subprocess.CompletedProcess:
    """Run `command` as a process acting for the fork in `env`: through the launcher when `confined`."""
    launcher = [sys.executable, "-m", "dpone_dagster.confinement.launcher", "--"] if confined else []
    return subprocess.run(
        [*launcher, *command], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
    )


def last_json_line(text: str) -> dict:
    """The last line of `text` that is a JSON object (what a door script prints as its report)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON report in the output:\n{text[-3000:]}")
