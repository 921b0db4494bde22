"""Native compile: every publishing dbt project of a source snapshot, compiled sealed and offline.

`compile_native(source_root, source_snapshot_digest)` discovers each dbt project (every
`dbt_project.yml` outside `dbt_packages/`, `target/`, `logs/` and hidden folders), copies exactly its
declared inputs into a private directory while hashing them, and runs dbt there in a subprocess with
a scrubbed environment and a fixed compile profile (a throwaway in-memory DuckDB configured through
`dpone_dagster.lake.duck`, no lake attached). dbt itself parses, compiles and selects (`dbt ls`), so
membership is dbt-authoritative. The result is a deterministic projection of the manifest (never
its raw bytes, which carry timestamps and invocation ids) with a selection fingerprint per project.

Before returning, the projection is checked for complete membership (each selected node's upstream
nodes are selected too; nothing is empty; no id appears twice) and for source closure (every file the
manifest names is an input whose bytes match dbt's own checksum, and the snapshot's files did not
drift while dbt ran).

What a reader could get wrong: native workload ids are dbt unique ids of the *writing* nodes
(models, seeds, snapshots). Data tests are part of the compiled closure but are not workloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

import yaml

from dpone_dagster.contracts.canonical import dumps
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.release_documents import SELECTION_KIND
from dpone_dagster.release.errors import (
    LogicalWriteCollisionError,
    MembershipError,
    NativeCompileError,
    SourceClosureError,
)
from dpone_dagster.release.source.snapshot import SourceSnapshot

COMPILE_PROFILE_KIND = "dpone.dbt-compile-profile.v1"
WORKLOAD_RESOURCE_TYPES = ("model", "seed", "snapshot")
DEFAULT_SELECTION = ("--select", "fqn:*")
RELEASE_SELECTOR_NAME = "dpone_release"
COMPILE_TIMEOUT_SECONDS = 900
_SKIPPED_DIRS = {"dbt_packages", "target", "logs", "node_modules", "__pycache__"}
_PATH_KEYS = (
    ("model-paths", ("models",)),
    ("macro-paths", ("macros",)),
    ("seed-paths", ("seeds",)),
    ("snapshot-paths", ("snapshots",)),
    ("test-paths", ("tests",)),
    ("analysis-paths", ("analyses",)),
    ("docs-paths", ()),
)
_PROJECT_FILES = ("dbt_project.yml", "selectors.yml")
_WORKLOAD_SUFFIXES = (".sql", ".py", ".csv")
_WORKLOAD_PATH_KEYS = ("model-paths", "seed-paths", "snapshot-paths")
_DOWNLOADING_FILES = ("packages.yml", "dependencies.yml")

COMPILE_PROFILE: dict[str, object] = {
    "type": "duckdb",
    "path": ":memory:",
    "schema": "main",
    "threads": 1,
    "settings": {"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    "plugins": [{"module": "dpone_dagster.release.build.dbt_compile_plugin"}],
}


@dataclass(frozen=True)
class SourceFile:
    """A file of the compile closure: path relative to the source root, plain SHA-256 hex, size."""

    path: str
    content_sha256: str
    size: int


@dataclass(frozen=True)
class NativeNode:
    """The deterministic projection of one selected dbt node."""

    unique_id: str
    resource_type: str
    original_file_path: str
    dbt_checksum: str
    compiled_sha256: str
    materialized: str
    logical_write: str
    depends_on: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "unique_id": self.unique_id,
            "resource_type": self.resource_type,
            "original_file_path": self.original_file_path,
            "dbt_checksum": self.dbt_checksum,
            "compiled_sha256": self.compiled_sha256,
            "materialized": self.materialized,
            "logical_write": self.logical_write,
            "depends_on": list(self.depends_on),
        }


@dataclass(frozen=True)
class NativeProject:
    """One publishing dbt project, compiled: inputs, dbt-selected nodes and their fingerprint."""

    name: str
    path: str
    selection: tuple[str, ...]
    selected: tuple[str, ...]
    nodes: tuple[NativeNode, ...]
    closure: tuple[SourceFile, ...]
    project_file_sha256: str
    selection_document: bytes
    selection_fingerprint: str

    @property
    def logical_writes(self) -> dict[str, str]:
        return {node.logical_write: node.unique_id for node in self.nodes}

    @property
    def source_bytes(self) -> int:
        return sum(item.size for item in self.closure)


@dataclass(frozen=True)
class NativeCompilation:
    """Every publishing project of one source snapshot, compiled by one dbt version."""

    source_snapshot_digest: str
    dbt_version: str
    adapter_version: str
    profile_digest: str
    projects: tuple[NativeProject, ...]

    @property
    def membership(self) -> tuple[str, ...]:
        return tuple(sorted(uid for project in self.projects for uid in project.selected))

    @property
    def source_bytes(self) -> int:
        return sum(project.source_bytes for project in self.projects)


def compile_profile_digest() -> str:
    return digest(COMPILE_PROFILE_KIND, COMPILE_PROFILE)


def discover_projects(source_root: Path) -> tuple[str, ...]:
    """Relative POSIX paths (`.` for the root) of every publishing dbt project, sorted."""
    found: list[str] = []
    for directory, subdirs, files in os.walk(source_root, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        if "dbt_project.yml" in files:
            relative = Path(directory).relative_to(source_root).as_posix()
            found.append(relative)
    return tuple(sorted(found))


class CompilableSource(Protocol):
    """A verified source copy (`dpone_dagster.release.source.snapshot.SourceTree` is one)."""

    @property
    def root(self) -> Path: ...

    @property
    def snapshot(self) -> SourceSnapshot: ...


def compile_native(
    source: CompilableSource,
    *,
    work_dir: Path | None = None,
    timeout_seconds: int = COMPILE_TIMEOUT_SECONDS,
) -> NativeCompilation:
    """Compile every publishing project of a verified source copy (see the module docstring)."""
    source_root = Path(source.root)
    snapshot = source.snapshot
    paths = discover_projects(source_root)
    if not paths:
        raise NativeCompileError("release.native_no_project", "the source snapshot holds no dbt project")
    with tempfile.TemporaryDirectory(prefix="dpone-native-", dir=work_dir) as private:
        projects = tuple(
            _compile_project(source_root, snapshot, path, Path(private) / f"p{index}", timeout_seconds)
            for index, path in enumerate(paths)
        )
    _require_unique(projects)
    from dbt.adapters.duckdb.__version__ import version as adapter_version
    from dbt.version import __version__ as dbt_version

    return NativeCompilation(
        source_snapshot_digest=snapshot.digest,
        dbt_version=str(dbt_version),
        adapter_version=str(adapter_version),
        profile_digest=compile_profile_digest(),
        projects=projects,
    )


def _compile_project(
    source_root: Path, snapshot: SourceSnapshot, relative: str, private: Path, timeout_seconds: int
) -> NativeProject:
    project_root = source_root / relative
    config = _read_project_config(project_root, relative)
    name = str(config["name"])
    inputs = private / "project"
    closure = _copy_inputs(project_root, inputs, config, relative)
    _require_in_snapshot(closure, snapshot)
    _require_workload_files(closure, config, relative)
    selection = _selection(inputs)
    manifest, selected = _run_dbt(inputs, private, str(config.get("profile") or name), name, selection, timeout_seconds)
    nodes = _project_nodes(manifest, name, selected)
    by_path = {_inner(item.path, relative): item for item in closure}
    _require_closure(manifest, name, by_path, inputs)
    _require_complete_membership(nodes, name)
    _require_no_drift(project_root, relative, closure)
    project_file = by_path["dbt_project.yml"].content_sha256
    selection_document = dumps(
        {
            "project": name,
            "path": relative,
            "selection": list(selection),
            "resource_types": list(WORKLOAD_RESOURCE_TYPES),
            "profile_digest": compile_profile_digest(),
            "project_file_sha256": project_file,
            "nodes": [node.as_json() for node in nodes],
        }
    )
    return NativeProject(
        name=name,
        path=relative,
        selection=selection,
        selected=tuple(selected),
        nodes=nodes,
        closure=closure,
        project_file_sha256=project_file,
        selection_document=selection_document,
        selection_fingerprint=digest(SELECTION_KIND, selection_document),
    )


def _read_project_config(project_root: Path, relative: str) -> dict:
    for name in _DOWNLOADING_FILES:
        if (project_root / name).exists():
            raise NativeCompileError(
                "release.native_unsupported_project",
                f"project at {relative!r} declares packages ({name}); a sealed compile cannot download them",
            )
    try:
        config = yaml.safe_load((project_root / "dbt_project.yml").read_bytes())
    except yaml.YAMLError:
        raise NativeCompileError(
            "release.native_compile_failed", f"dbt_project.yml at {relative!r} is not valid YAML"
        ) from None
    if not isinstance(config, dict) or not isinstance(config.get("name"), str):
        raise NativeCompileError(
            "release.native_compile_failed", f"dbt_project.yml at {relative!r} has no project name"
        )
    return config


def _declared_dirs(config: Mapping, relative: str) -> list[str]:
    dirs: list[str] = []
    for key, default in _PATH_KEYS:
        values = config.get(key, list(default))
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise NativeCompileError(
                "release.native_compile_failed", f"{key} in project {relative!r} must be a list of paths"
            )
        for value in values:
            path = PurePosixPath(value)
            if path.is_absolute() or ".." in path.parts or "\\" in value:
                raise NativeCompileError(
                    "release.native_unsupported_project", f"{key} in project {relative!r} leaves the project directory"
                )
            dirs.append(path.as_posix())
    return sorted(set(dirs))


def _copy_inputs(project_root: Path, destination: Path, config: Mapping, relative: str) -> tuple[SourceFile, ...]:
    """Copy the project's exact inputs, hashing while copying; refuse links and special files."""
    copied: list[SourceFile] = []
    destination.mkdir(parents=True)

    def copy(source: Path, inner: str) -> None:
        if source.is_symlink() or not source.is_file():
            raise SourceClosureError(
                "release.source_closure_mismatch", f"{inner!r} in project {relative!r} is not a regular file"
            )
        target = destination / inner
        target.parent.mkdir(parents=True, exist_ok=True)
        hasher = hashlib.sha256()
        size = 0
        with source.open("rb") as reader, target.open("wb") as writer:
            while chunk := reader.read(1 << 20):
                hasher.update(chunk)
                writer.write(chunk)
                size += len(chunk)
        path = inner if relative == "." else f"{relative}/{inner}"
        copied.append(SourceFile(path=path, content_sha256=hasher.hexdigest(), size=size))

    for name in _PROJECT_FILES:
        if (project_root / name).exists() or (project_root / name).is_symlink():
            copy(project_root / name, name)
    for directory in _declared_dirs(config, relative):
        root = project_root / directory
        if root.is_symlink():
            raise SourceClosureError(
                "release.source_closure_mismatch", f"{directory!r} in project {relative!r} is a link"
            )
        if not root.is_dir():
            continue
        for walked, subdirs, files in os.walk(root, followlinks=False):
            for sub in subdirs:
                if (Path(walked) / sub).is_symlink():
                    raise SourceClosureError(
                        "release.source_closure_mismatch", f"a folder in project {relative!r} is a link"
                    )
            subdirs.sort()
            for file in sorted(files):
                copy(Path(walked) / file, (Path(walked) / file).relative_to(project_root).as_posix())
    return tuple(sorted(copied, key=lambda item: item.path))


def _require_workload_files(closure: tuple[SourceFile, ...], config: Mapping, relative: str) -> None:
    """An empty project is refused before dbt runs: no model, seed or snapshot file at all."""
    defaults = dict(_PATH_KEYS)
    roots = [root for key in _WORKLOAD_PATH_KEYS for root in config.get(key, list(defaults[key]))]
    prefixes = tuple(f"{_outer(root, relative)}/" for root in roots)
    if not any(item.path.startswith(prefixes) and item.path.endswith(_WORKLOAD_SUFFIXES) for item in closure):
        raise MembershipError(
            "release.membership_empty", f"project at {relative!r} has no model, seed or snapshot file"
        )


def _outer(inner: str, relative: str) -> str:
    return inner if relative == "." else f"{relative}/{inner}"


def _require_in_snapshot(closure: tuple[SourceFile, ...], snapshot: SourceSnapshot) -> None:
    for item in closure:
        recorded = snapshot.get(item.path)
        if recorded is None or recorded.sha256 != item.content_sha256 or recorded.size != item.size:
            raise SourceClosureError(
                "release.source_closure_mismatch", f"compile input {item.path!r} is not the verified snapshot's file"
            )


def _selection(inputs: Path) -> tuple[str, ...]:
    selectors = inputs / "selectors.yml"
    if selectors.is_file():
        loaded = yaml.safe_load(selectors.read_bytes()) or {}
        names = {item.get("name") for item in loaded.get("selectors", []) if isinstance(item, dict)}
        if RELEASE_SELECTOR_NAME in names:
            return ("--selector", RELEASE_SELECTOR_NAME)
    return DEFAULT_SELECTION


def _profile_yaml(profile_name: str, extension_directory: Path) -> str:
    output = json.loads(json.dumps(COMPILE_PROFILE))
    output["plugins"][0]["config"] = {"extension_directory": str(extension_directory)}
    return yaml.safe_dump({profile_name: {"target": "compile", "outputs": {"compile": output}}}, sort_keys=True)


def _scrubbed_environment(home: Path) -> dict[str, str]:
    return {
        "PATH": os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir()),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "DO_NOT_TRACK": "1",
        "TZ": "UTC",
    }


def _run_dbt(
    inputs: Path, private: Path, profile_name: str, name: str, selection: tuple[str, ...], timeout_seconds: int
) -> tuple[dict, list[str]]:
    profiles = private / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(_profile_yaml(profile_name, private / "duckdb_extensions"), encoding="utf-8")
    request = {
        "project_dir": str(inputs),
        "profiles_dir": str(profiles),
        "target_dir": str(private / "target"),
        "log_dir": str(private / "logs"),
        "selection": ["--resource-types", *WORKLOAD_RESOURCE_TYPES, *selection],
        "result_path": str(private / "result.json"),
    }
    (private / "request.json").write_text(json.dumps(request), encoding="utf-8")
    try:
        subprocess.run(
            [sys.executable, "-m", "dpone_dagster.release.build.dbt_worker", str(private / "request.json")],
            cwd=private,
            env=_scrubbed_environment(private),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout_seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise NativeCompileError(
            "release.native_compile_failed", f"dbt did not finish compiling project {name!r} in time"
        ) from None
    result_path = private / "result.json"
    if not result_path.is_file():
        raise NativeCompileError(
            "release.native_compile_failed", f"the dbt compile worker for project {name!r} crashed"
        )
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not result.get("ok"):
        cause = str(result.get("cause", "")).replace(str(private), "<private>")
        raise NativeCompileError(
            "release.native_compile_failed", f"dbt {result.get('phase')} of project {name!r} failed: {cause}"
        )
    manifest = json.loads((private / "target" / "manifest.json").read_text(encoding="utf-8"))
    shutil.rmtree(private / "logs", ignore_errors=True)
    return manifest, list(result["selected"])


def _project_nodes(manifest: Mapping, name: str, selected: list[str]) -> tuple[NativeNode, ...]:
    if not selected:
        raise MembershipError("release.membership_empty", f"dbt selects no model, seed or snapshot in project {name!r}")
    nodes = []
    for unique_id in selected:
        node = manifest["nodes"].get(unique_id)
        if node is None or node.get("package_name") != name:
            raise MembershipError(
                "release.membership_mismatch", f"dbt selected {unique_id!r}, which is not a node of project {name!r}"
            )
        compiled = node.get("compiled_code") or ""
        nodes.append(
            NativeNode(
                unique_id=unique_id,
                resource_type=node["resource_type"],
                original_file_path=node["original_file_path"],
                dbt_checksum=node["checksum"]["checksum"],
                compiled_sha256=hashlib.sha256(compiled.encode("utf-8")).hexdigest(),
                materialized=str(node.get("config", {}).get("materialized", "")),
                logical_write=f"{node['schema']}.{node['alias']}".lower(),
                depends_on=tuple(sorted(node.get("depends_on", {}).get("nodes", []))),
            )
        )
    return tuple(nodes)


def _dbt_checksum(path: Path) -> str | None:
    """dbt's own file checksum: SHA-256 of the UTF-8 text with surrounding whitespace stripped."""
    try:
        return hashlib.sha256(path.read_bytes().decode("utf-8").strip().encode("utf-8")).hexdigest()
    except UnicodeDecodeError:
        return None


def _require_closure(manifest: Mapping, name: str, by_path: Mapping[str, SourceFile], inputs: Path) -> None:
    """Every project file dbt read is a verified input, and dbt checksummed exactly its bytes."""
    entries = [*manifest.get("nodes", {}).values(), *manifest.get("macros", {}).values()]
    for entry in entries:
        if entry.get("package_name") != name:
            continue
        path = entry.get("original_file_path")
        item = by_path.get(path)
        if item is None:
            raise SourceClosureError(
                "release.source_closure_mismatch", f"project {name!r} compiled {path!r}, which is not a verified input"
            )
        checksum = entry.get("checksum") or {}
        if checksum.get("name") == "sha256" and checksum.get("checksum") != _dbt_checksum(inputs / path):
            raise SourceClosureError(
                "release.source_closure_mismatch", f"dbt read different bytes for {path!r} than were verified"
            )
        patch = entry.get("patch_path")
        if patch and patch.split("://", 1)[-1] not in by_path:
            raise SourceClosureError(
                "release.source_closure_mismatch", f"project {name!r} read properties outside its verified inputs"
            )


def _require_complete_membership(nodes: tuple[NativeNode, ...], name: str) -> None:
    selected = {node.unique_id for node in nodes}
    for node in nodes:
        for upstream in node.depends_on:
            kind = upstream.split(".", 1)[0]
            if kind in WORKLOAD_RESOURCE_TYPES and upstream not in selected:
                raise MembershipError(
                    "release.membership_mismatch",
                    f"{node.unique_id!r} depends on {upstream!r}, which the selection of project {name!r} leaves out",
                )


def _require_no_drift(project_root: Path, relative: str, closure: tuple[SourceFile, ...]) -> None:
    for item in closure:
        try:
            data = (project_root / _inner(item.path, relative)).read_bytes()
        except OSError:
            data = None
        if data is None or hashlib.sha256(data).hexdigest() != item.content_sha256:
            raise SourceClosureError(
                "release.source_closure_mismatch", f"{item.path!r} changed while the project was compiled"
            )


def _inner(path: str, relative: str) -> str:
    """A source-root-relative path as seen from inside the project at `relative`."""
    return path if relative == "." else path[len(relative) + 1 :]


def _require_unique(projects: tuple[NativeProject, ...]) -> None:
    names = [project.name for project in projects]
    if len(names) != len(set(names)):
        raise MembershipError("release.membership_duplicate", "two dbt projects in the snapshot share a project name")
    writes: dict[str, str] = {}
    for project in projects:
        for relation, uid in project.logical_writes.items():
            if relation in writes:
                raise LogicalWriteCollisionError(
                    "release.logical_write_collision", f"{writes[relation]!r} and {uid!r} both write {relation!r}"
                )
            writes[relation] = uid
