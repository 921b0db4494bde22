"""A dbt project as a `DbtProject` (one named by a folder, or the one the configuration names), and the
guarded preparation of its manifest.

The manifest is prepared once: by `dpone prepare` (what `make dev` and a production image build
run), or, if it is missing or stale, by the first process that loads the code location. "Stale" is
decided by a fingerprint of the project's source files stored next to the manifest, so the run
workers `dagster dev` starts for every run load the definitions without running `dbt parse` again,
and a changed model is still picked up on the next load. The fingerprint is taken over a SHA-256 per
file, stored beside it (`dpone_manifest.sources.json`), so a load after an edit knows which files
changed: when they are only plain-SQL edits of models, the manifest follows them without starting
dbt (`sql_edits.py`: the two fields dbt would change, proven equal to a real parse by the tests);
any other change runs `dbt parse`.

The manifest also follows the files between loads: a dbt op asks `sources_changed_since` before it
builds. When nothing changed since the manifest its definitions were loaded with (the fingerprint
stored next to it, read at load: `stored_fingerprint`), it costs one fingerprint and the run's read
set comes from the loaded manifest. When a model was edited since, the run parses nothing itself:
`dbt build` parses the edited files anyway (partial parse), and the dpone plugin takes the read set
from the manifest that invocation parsed (`lake/dbt_plugin.py`). The next load of the location
prepares the manifest on disk again.

What a reader could get wrong: dagster-dbt's own `prepare_if_dev()` re-parses in *every* process
that sees `DAGSTER_IS_DEV_CLI`, run workers included; that is the behaviour this module replaces.
A run or step worker (`dagster api execute_run|execute_step|resume_run`) never parses while it
*loads* the definitions, even when a model was edited since: the job it runs was planned from the
loaded manifest, and re-parsing at load could change the assets under a planned run. The refreshed
manifest is read for the read set only; the assets of the run stay those it was planned with.
Nothing here knows a particular project: `configured_dbt_project()` is whatever `dbt_project_dir`
names (dpone.yaml; this repository's default is its demo project), resolved only when called.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
from functools import lru_cache
from pathlib import Path

from dagster_dbt import DbtProject
from filelock import FileLock, Timeout

from dpone_dagster.config import load_config
from dpone_dagster.errors import DponeError
from dpone_dagster.integration.dbt.cli import InstalledDbtCliResource  # no `dbt --version`, no adapter
from dpone_dagster.integration.dbt.prewarm import command_among
from dpone_dagster.integration.dbt.sql_edits import follow_sql_edits, read_manifest, write_manifest

log = logging.getLogger(__name__)

FINGERPRINT_FILE = "dpone_manifest.fingerprint"
DIGESTS_FILE = "dpone_manifest.sources.json"  # per file: what the manifest was prepared from
PARSE_ARGS = ("parse", "--quiet")
_PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "packages.yml", "dependencies.yml", "selectors.yml")
_SOURCE_DIRS = ("models", "macros", "tests", "seeds", "snapshots", "analyses")
_LOCK_TIMEOUT_SECONDS = 300
_WORKER_COMMANDS = (("api", "execute_run"), ("api", "execute_step"), ("api", "resume_run"))


def in_run_worker(argv: list[str] | None = None, *, spawned: bool | None = None) -> bool:
    """True in a process Dagster started to execute a run or a step (its command line says so).

    A run launched through a code server (the UI, GraphQL) executes in a `multiprocessing` child
    the code server spawns (`start_run_in_subprocess`): it carries the server's `api grpc` command
    line, so a spawned child of `api grpc` is a run worker too. `spawned` defaults to whether this
    process has a multiprocessing parent.
    """
    return command_among(_WORKER_COMMANDS, argv, spawned=spawned)


class DbtProjectError(DponeError):
    code = "dbt.project_error"


def dbt_executable() -> str:
    """The `dbt` installed next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name("dbt")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("dbt")
    if found is None:
        raise DbtProjectError("no `dbt` executable next to the Python interpreter or on PATH")
    return found


def dbt_project_at(project_dir: str | Path, profiles_dir: str | Path | None = None) -> DbtProject:
    """The `DbtProject` in `project_dir` (profiles.yml in `profiles_dir`, default the project folder).

    Its target folder (manifest, partial parse, fingerprint, lock) is `DBT_TARGET_PATH` when that is
    set, as for dbt itself and dagster-dbt's runs: a fork's confined processes cannot write the
    project's own `target/`, and the launcher points `DBT_TARGET_PATH` at the fork's `dbt/target`."""
    project_dir = Path(project_dir).resolve()
    if not (project_dir / "dbt_project.yml").is_file():
        raise DbtProjectError(
            f"no dbt_project.yml in the dbt project folder {project_dir.name!r}", code="dbt.project_missing"
        )
    return DbtProject(
        project_dir=project_dir,
        profiles_dir=Path(profiles_dir).resolve() if profiles_dir else project_dir,
        target_path=Path(os.environ.get("DBT_TARGET_PATH") or "target"),
    )


@lru_cache(maxsize=4)
def _configured_dbt_project(project_dir: Path) -> DbtProject:
    """One `DbtProject` per configured folder and process: the location's assets, resource and manifest
    preparation share it (the translator memoizes specs per project object)."""
    return dbt_project_at(project_dir)


def configured_dbt_project() -> DbtProject:
    """The dbt project the configuration's `dbt_project_dir` names (profiles.yml in the project folder)."""
    config = load_config()
    if config.dbt_project_dir is None:
        raise DbtProjectError(
            "no dbt project is configured: set `dbt_project_dir` in dpone.yaml (or [tool.dpone]) to your "
            "dbt project's folder",
            code="dbt.project_missing",
        )
    project_dir = config.dbt_project_path
    if not (project_dir / "dbt_project.yml").is_file():
        raise DbtProjectError(
            f"the setting `dbt_project_dir` (dpone.yaml) names the folder {project_dir.name!r}, which has no "
            "dbt_project.yml; point it at your dbt project",
            code="dbt.project_missing",
        )
    return _configured_dbt_project(project_dir)


def source_digests(project_dir: Path) -> dict[str, str]:
    """The SHA-256 of every file dbt parses, by its path relative to `project_dir`."""
    files = [project_dir / name for name in _PROJECT_FILES]
    for folder in _SOURCE_DIRS:
        files.extend(p for p in (project_dir / folder).rglob("*") if p.is_file())
    return {
        path.relative_to(project_dir).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(p for p in files if p.is_file())
    }


def fingerprint_of(digests: dict[str, str]) -> str:
    """One SHA-256 over the relative path and digest of every source file."""
    digest = hashlib.sha256()
    for relative, content in sorted(digests.items()):
        digest.update(len(relative).to_bytes(4, "big") + relative.encode() + content.encode())
    return digest.hexdigest()


def project_fingerprint(project_dir: Path) -> str:
    """The fingerprint of every file dbt parses (`fingerprint_of(source_digests(project_dir))`)."""
    return fingerprint_of(source_digests(project_dir))


def _fingerprint_path(project: DbtProject) -> Path:
    return project.manifest_path.with_name(FINGERPRINT_FILE)


def _digests_path(project: DbtProject) -> Path:
    return project.manifest_path.with_name(DIGESTS_FILE)


def _stored_digests(project: DbtProject) -> dict[str, str] | None:
    try:
        stored = json.loads(_digests_path(project).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or not all(isinstance(v, str) for v in stored.values()):
        return None
    return stored


def stored_fingerprint(project: DbtProject) -> str | None:
    """The source fingerprint the manifest on disk was parsed from (None: never prepared).

    Read it *before* loading the manifest: if a refresh lands in between, the pair then looks stale
    (and is refreshed again), never current with an older manifest."""
    stored = _fingerprint_path(project)
    if not project.manifest_path.is_file() or not stored.is_file():
        return None
    return stored.read_text(encoding="utf-8").strip() or None


def manifest_is_current(project: DbtProject) -> bool:
    stored = stored_fingerprint(project)
    return stored is not None and stored == project_fingerprint(project.project_dir)


def prepare_manifest(project: DbtProject | None = None, *, force: bool = False) -> bool:
    """Run `dbt parse` unless the manifest matches the sources. Returns whether it parsed.

    `project` defaults to `configured_dbt_project()`.
    Concurrent callers (several processes loading the code location at once) serialize on a
    lock file; the ones that waited find the manifest current and do not parse again.
    """
    project = project or configured_dbt_project()
    if not force and in_run_worker() and project.manifest_path.is_file():
        return False  # a run worker trusts the manifest prepared when the location loaded
    return _parse_unless_current(project, force=force)


def sources_changed_since(project: DbtProject, loaded_fingerprint: str | None) -> bool:
    """Whether the dbt sources differ from those `loaded_fingerprint` (what the running definitions
    were loaded from) was taken of; True when there is none to compare."""
    return loaded_fingerprint is None or loaded_fingerprint != project_fingerprint(project.project_dir)


def _parse_unless_current(project: DbtProject, *, force: bool) -> bool:
    if not force and manifest_is_current(project):
        return False
    project.manifest_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(project.manifest_path.with_name("dpone_manifest.lock")))
    try:
        with lock.acquire(timeout=_LOCK_TIMEOUT_SECONDS):
            if not force and manifest_is_current(project):
                return False
            digests = source_digests(project.project_dir)
            if force or not _follow_sql_edits(project, digests):
                _parse(project)
            _replace(_digests_path(project), json.dumps(digests, sort_keys=True))
            _replace(_fingerprint_path(project), fingerprint_of(digests) + "\n")  # last: the manifest is current
    except Timeout:
        raise DbtProjectError(
            "another process has held the manifest lock for over five minutes", code="dbt.parse_locked"
        ) from None
    log.info("prepared the dbt manifest for %s", project.name)
    return True


def _follow_sql_edits(project: DbtProject, digests: dict[str, str]) -> bool:
    """Whether the manifest on disk now follows the sources without a parse (`sql_edits.py`)."""
    prepared = _stored_digests(project)
    manifest = read_manifest(project.manifest_path) if prepared is not None else None
    if manifest is None or prepared is None:
        return False
    followed = follow_sql_edits(manifest, project.project_dir, prepared, digests)
    if followed is None:
        return False
    write_manifest(project.manifest_path, manifest)
    log.info("the dbt manifest follows the SQL edit of %s without a parse", ", ".join(followed))
    return True


def _parse(project: DbtProject) -> None:
    invocation = InstalledDbtCliResource(project_dir=project, dbt_executable=dbt_executable()).cli(
        list(PARSE_ARGS), target_path=project.target_path, raise_on_error=False
    )
    invocation.wait()
    if not invocation.is_successful() or not project.manifest_path.is_file():
        raise DbtProjectError(
            f"`dbt parse` failed for {project.name}; run `dbt parse` in the project folder to see the error",
            code="dbt.parse_failed",
        )


def _replace(path: Path, text: str) -> None:
    staged = path.with_suffix(".tmp")
    staged.write_text(text, encoding="utf-8")
    staged.replace(path)
