"""What `dpone dev` serves, for any project: the workspace file it hands `dagster dev`, and a port.

`serve_plan(config, module=..., workspace_file=...)` picks the code locations: `-m module`, or
`-w workspace.yaml`, or (neither given) the project's own `workspace.yaml`, else the dg project's
`<root_module>.definitions` (`[tool.dg.project]` in pyproject.toml), else `config.location_unspecified`.
It writes a derived workspace file into the workspace's Dagster home in which every code location is
named `<name>@<workspace>` (`-m`: `<project>@<workspace>`), so the UI says which workspace it serves
and prod's and a fork's UI side by side are told apart; relative paths are made absolute against the
original file's folder. `pick_port(None)` is 3000 when free, else a free port the kernel gives.

What a reader could get wrong: the user's workspace.yaml is never edited; the derived file
(`dpone-dev-workspace.yaml`) is rewritten at each start. A port is free when this process could bind
it a moment ago; another process may still take it before the webserver does.
"""

from __future__ import annotations

import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml

from dpone_dagster.config import DponeConfig
from dpone_dagster.errors import ConfigError

DERIVED_WORKSPACE_FILE = "dpone-dev-workspace.yaml"
DEFAULT_PORT = 3000
_ENTRY_KINDS = ("python_module", "python_file", "python_package")


class LocationUnspecifiedError(ConfigError):
    code = "config.location_unspecified"


class PortBusyError(ConfigError):
    code = "config.port_busy"


@dataclass(frozen=True)
class ServePlan:
    workspace_file: Path
    location_names: tuple[str, ...]
    modules: tuple[str, ...]
    """Python modules among the locations (their DuckLake assets get the fork's first observations)."""
    import_dirs: tuple[Path, ...] = ()
    """Their working directories: Dagster imports a module location from there, and so must `dpone dev`."""


def _pyproject(root: Path) -> dict:
    path = root / "pyproject.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def project_name(config: DponeConfig) -> str:
    """The project's name: `[project].name` of its pyproject.toml, else the root folder's name."""
    name = _pyproject(config.project_root).get("project", {}).get("name")
    return str(name) if name else config.project_root.name


def _dg_module(config: DponeConfig) -> str | None:
    project = _pyproject(config.project_root).get("tool", {}).get("dg", {}).get("project", {})
    root_module = project.get("root_module") if isinstance(project, dict) else None
    return f"{root_module}.definitions" if root_module else None


def _absolute(value: str, folder: Path) -> str:
    return value if Path(value).is_absolute() else str((folder / value).resolve())


def _derived_entries(source: Path, workspace: str) -> tuple[list[dict], list[str], list[str], list[Path]]:
    try:
        loaded = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        raise LocationUnspecifiedError(f"the workspace file {source.name!r} cannot be read as YAML") from None
    entries, names, modules, import_dirs = [], [], [], []
    for entry in loaded.get("load_from") or []:
        kind = next((k for k in _ENTRY_KINDS if isinstance(entry, dict) and k in entry), None)
        if kind is None:
            entries.append(entry)  # a grpc_server entry: served as written
            continue
        body = (
            entry[kind]
            if isinstance(entry[kind], dict)
            else {"module_name" if kind != "python_file" else "relative_path": entry[kind]}
        )
        body = dict(body)
        base = (
            body.get("location_name")
            or body.get("module_name")
            or body.get("package_name")
            or Path(str(body.get("relative_path"))).stem
        )
        body["location_name"] = f"{base}@{workspace}"
        body["working_directory"] = _absolute(str(body.get("working_directory", ".")), source.parent)
        if kind == "python_file":
            body["relative_path"] = _absolute(str(body["relative_path"]), source.parent)
        if kind == "python_module":
            modules.append(str(body["module_name"]))
            import_dirs.append(Path(body["working_directory"]))
        names.append(body["location_name"])
        entries.append({kind: body})
    return entries, names, modules, import_dirs


def serve_plan(
    config: DponeConfig, home: Path, *, module: str | None = None, workspace_file: Path | None = None
) -> ServePlan:
    """The derived workspace file `dpone dev` serves, written into `home` (see the module docstring)."""
    if module and workspace_file:
        raise LocationUnspecifiedError("give either -m MODULE or -w WORKSPACE_FILE, not both")
    if workspace_file is None and module is None:
        if (config.project_root / "workspace.yaml").is_file():
            workspace_file = config.project_root / "workspace.yaml"
        else:
            module = _dg_module(config)
    if workspace_file is not None:
        if not workspace_file.is_file():
            raise LocationUnspecifiedError(f"no workspace file {workspace_file.name!r} there")
        entries, names, modules, import_dirs = _derived_entries(workspace_file.resolve(), config.workspace)
    elif module is not None:
        name = f"{project_name(config)}@{config.workspace}"
        entries = [
            {
                "python_module": {
                    "module_name": module,
                    "location_name": name,
                    "working_directory": str(config.project_root),
                }
            }
        ]
        names, modules, import_dirs = [name], [module], [config.project_root]
    else:
        raise LocationUnspecifiedError(
            "nothing to serve: pass -m MODULE (your Definitions module) or -w WORKSPACE_FILE, or keep a "
            "workspace.yaml at the project root, or make it a dg project ([tool.dg.project] root_module)"
        )
    target = home / DERIVED_WORKSPACE_FILE
    target.write_text(
        "# Written by `dpone dev` at each start; edit your own workspace file instead.\n"
        + yaml.safe_dump({"load_from": entries}, sort_keys=False),
        encoding="utf-8",
    )
    return ServePlan(
        workspace_file=target,
        location_names=tuple(names),
        modules=tuple(modules),
        import_dirs=tuple(dict.fromkeys(import_dirs)),
    )


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_port(requested: int | None) -> int:
    """`requested` when free (`config.port_busy` when not); with none, 3000 or else any free port."""
    if requested is not None:
        if not _free(requested):
            raise PortBusyError(f"port {requested} is in use; pick another or leave --port out for a free one")
        return requested
    if _free(DEFAULT_PORT):
        return DEFAULT_PORT
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
