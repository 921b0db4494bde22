"""`dpone init`: turn an existing dbt-duckdb project into a fork-aware Dagster project, in place.

Run at the folder that is to be the project root (usually the repository root). `plan_init` reads
and decides, `apply_init` writes; three changes at most:
1. `dpone.yaml` at the root naming `dbt_project_dir` (what makes this folder the project root);
2. in the dbt project's `profiles.yml`, a new target (default `dpone`) of the dbt project's profile
   attaching the lake through the dpone plugin (`dpone_dagster.lake.dbt_plugin`), made the profile's
   default target so a terminal `dbt build` goes through it too; the other targets stay as they were;
3. the Dagster side: in a dg project (`[tool.dg.project]` in pyproject.toml) the component's
   `<root_module>/defs/<name>/defs.yaml`, else a `definitions.py` at the root with one
   `fork_aware_dbt_definitions` call.
Idempotent: a second run finds each change made and changes nothing. Refusals (`init.*`): no dbt
project, no profiles.yml beside it, a profile that is not dbt-duckdb, a target attaching other
databases (the lake is attached by the plugin; an extra non-DuckLake ATTACH is not converted), or a
dpone.yaml naming another dbt project.

What a reader could get wrong: profiles.yml is rewritten as YAML, so its comments are not kept; the
default output and `--dry-run` show the change as a diff first. The old target's local DuckDB file
is not migrated into the lake: build prod once (`dbt build`, or materialize in Dagster).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

import typer
import yaml

from dpone_dagster.errors import DponeError

PLUGIN_MODULE = "dpone_dagster.lake.dbt_plugin"
COMPONENT_TYPE = "dpone_dagster.integration.dbt.component.ForkAwareDbtProjectComponent"


class InitError(DponeError):
    code = "init.refused"


@dataclass(frozen=True)
class FileChange:
    path: Path
    before: str | None
    after: str

    def diff(self, root: Path) -> str:
        name = str(self.path.relative_to(root)) if self.path.is_relative_to(root) else self.path.name
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=f"a/{name}" if self.before is not None else "/dev/null",
            tofile=f"b/{name}",
        )
        return "".join(lines)


@dataclass(frozen=True)
class InitPlan:
    root: Path
    dbt_project: Path
    changes: list[FileChange] = field(default_factory=list)


def _read_yaml(path: Path, what: str) -> dict:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        raise InitError(f"{what} ({path.name}) cannot be read as YAML", code="init.unreadable") from None
    if not isinstance(loaded, dict):
        raise InitError(f"{what} ({path.name}) is not a mapping", code="init.unreadable")
    return loaded


def find_dbt_project(root: Path, given: Path | None) -> Path:
    if given is not None:
        folder = (root / given).resolve()
        if not (folder / "dbt_project.yml").is_file():
            raise InitError(f"no dbt_project.yml in {given}", code="init.dbt_project_missing")
        return folder
    found = sorted(
        p.parent
        for p in [root / "dbt_project.yml", *root.glob("*/dbt_project.yml"), *root.glob("*/*/dbt_project.yml")]
        if p.is_file()
    )
    found = [p for p in found if not {"dbt_packages", "target", ".venv"} & set(p.relative_to(root).parts)]
    if len(found) != 1:
        raise InitError(
            f"{'no' if not found else len(found)} dbt projects found here (looked two folders deep); "
            "name yours with --dbt-project DIR",
            code="init.dbt_project_missing",
        )
    return found[0].resolve()


def _plugin_target(old: dict, lake: str) -> dict:
    return {
        "type": "duckdb",
        "path": ":memory:",
        "database": f"lake_{lake}",
        "schema": old.get("schema", "main"),
        "threads": 1,
        **({"extensions": old["extensions"]} if old.get("extensions") else {}),
        **({"settings": old["settings"]} if old.get("settings") else {}),
        "plugins": [
            *(p for p in old.get("plugins") or [] if p.get("module") != PLUGIN_MODULE),
            {"module": PLUGIN_MODULE, "alias": "dpone", "config": {"lake": lake}},
        ],
        "attach": [
            {
                "path": f"ducklake:dpone-plugin-did-not-attach-this-lake/lake_{lake}.ducklake",
                "alias": f"lake_{lake}",
                "is_ducklake": True,
                "options": {"create_if_not_exists": False},
            }
        ],
    }


def _is_fork_aware(output: dict) -> bool:
    return any(isinstance(p, dict) and p.get("module") == PLUGIN_MODULE for p in output.get("plugins") or [])


def _profile_change(dbt_project: Path, target_name: str, lake: str) -> FileChange | None:
    profile_name = _read_yaml(dbt_project / "dbt_project.yml", "the dbt project").get("profile")
    path = dbt_project / "profiles.yml"
    if not path.is_file():
        raise InitError(
            "no profiles.yml beside dbt_project.yml: dpone reads the profile there", code="init.profiles_missing"
        )
    before = path.read_text(encoding="utf-8")
    profiles = _read_yaml(path, "the profiles")
    profile = profiles.get(profile_name)
    if not isinstance(profile, dict) or not isinstance(profile.get("outputs"), dict) or not profile["outputs"]:
        raise InitError(
            f"profiles.yml has no outputs for the profile {profile_name!r}", code="init.profile_unsupported"
        )
    outputs = profile["outputs"]
    existing = outputs.get(target_name)
    if isinstance(existing, dict) and _is_fork_aware(existing) and profile.get("target") == target_name:
        return None
    base = outputs.get(profile.get("target")) or next(iter(outputs.values()))
    if not isinstance(base, dict) or base.get("type") != "duckdb":
        raise InitError(
            f"the profile's target is type {base.get('type') if isinstance(base, dict) else None!r}: "
            "dpone-dagster forks dbt-duckdb projects only",
            code="init.profile_unsupported",
        )
    other = [a for a in base.get("attach") or [] if not (isinstance(a, dict) and a.get("is_ducklake"))]
    if other:
        raise InitError(
            "the target ATTACHes other (non-DuckLake) databases; the fork-aware target attaches only the "
            "lake, so move those reads into dbt sources of the lake first",
            code="init.profile_unsupported",
        )
    outputs[target_name] = (
        existing if isinstance(existing, dict) and _is_fork_aware(existing) else _plugin_target(base, lake)
    )
    profile["target"] = target_name
    return FileChange(path, before, yaml.safe_dump(profiles, sort_keys=False))


def _config_change(root: Path, dbt_project: Path) -> FileChange | None:
    relative = dbt_project.relative_to(root).as_posix() if dbt_project.is_relative_to(root) else str(dbt_project)
    path = root / "dpone.yaml"
    if path.is_file():
        named = _read_yaml(path, "dpone.yaml").get("dbt_project_dir")
        if named is not None and (root / str(named)).resolve() == dbt_project:
            return None
        if named is not None:
            raise InitError(
                "dpone.yaml already names another dbt project (dbt_project_dir)", code="init.config_conflict"
            )
        before = path.read_text(encoding="utf-8")
        return FileChange(path, before, f"dbt_project_dir: {relative}\n" + before)
    body = (
        "# dpone project root (written by `dpone init`); see docs/adopting.md for lakes, forks and releases.\n"
        f"dbt_project_dir: {relative}\n"
    )
    return FileChange(path, None, body)


def _dagster_change(root: Path, dbt_project: Path, lake: str) -> FileChange | None:
    import tomllib

    pyproject = root / "pyproject.toml"
    dg = {}
    if pyproject.is_file():
        dg = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("dg", {}).get("project", {})
    relative = dbt_project.relative_to(root).as_posix() if dbt_project.is_relative_to(root) else str(dbt_project)
    if dg.get("root_module"):
        path = root / str(dg["root_module"]).replace(".", "/") / "defs" / dbt_project.name / "defs.yaml"
        body = (
            f"type: {COMPONENT_TYPE}\nattributes:\n"
            f"  project_dir: '{{{{ context.project_root }}}}/{relative}'\n  lake: {lake}\n"
        )
    else:
        path = root / "definitions.py"
        body = (
            '"""This project\'s Dagster definitions: its dbt project, fork-aware (written by `dpone init`)."""\n\n'
            "from pathlib import Path\n\n"
            "from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions\n"
            "from dpone_dagster.workspaces.branch import ensure_for_deployment\n\n"
            "ensure_for_deployment()  # a Dagster+ branch deployment's fork exists before the assets load\n\n"
            f'defs = fork_aware_dbt_definitions(project_dir=Path(__file__).resolve().parent / "{relative}", '
            f'lake="{lake}")\n'
        )
    return None if path.exists() else FileChange(path, None, body)


def plan_init(root: Path, *, dbt_project: Path | None = None, target: str = "dpone", lake: str = "main") -> InitPlan:
    """What `dpone init` would change under `root` (nothing written)."""
    root = root.resolve()
    project = find_dbt_project(root, dbt_project)
    changes = [
        change
        for change in (
            _config_change(root, project),
            _profile_change(project, target, lake),
            _dagster_change(root, project, lake),
        )
        if change is not None
    ]
    return InitPlan(root=root, dbt_project=project, changes=changes)


def apply_init(plan: InitPlan) -> None:
    for change in plan.changes:
        change.path.parent.mkdir(parents=True, exist_ok=True)
        change.path.write_text(change.after, encoding="utf-8")


def init(
    dbt_project: Path = typer.Option(
        None, "--dbt-project", help="The dbt project folder (default: the one found here)."
    ),
    target: str = typer.Option("dpone", "--target", help="Name of the fork-aware profile target to add."),
    lake: str = typer.Option("main", "--lake", help="The DuckLake the dbt models are tables of."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; write nothing."),
) -> None:
    """Make the dbt-duckdb project here fork-aware: dpone.yaml, the profile target, the Dagster definitions."""
    try:
        plan = plan_init(Path.cwd(), dbt_project=dbt_project, target=target, lake=lake)
    except DponeError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(1) from None
    if not plan.changes:
        typer.echo("nothing to change: this project is already fork-aware")
        return
    for change in plan.changes:
        typer.echo(change.diff(plan.root), nl=False)
    if dry_run:
        typer.echo(f"dry run: {len(plan.changes)} file(s) would change")
        return
    apply_init(plan)
    typer.echo(f"wrote {len(plan.changes)} file(s); next: `dpone dev`, then `dpone fork create NAME --parent prod`")
