"""Which trees a fork's process may write, computed from the configuration (everything else read-only).

`fork_policy(config, environ)` answers for the configured workspace (None for `prod`, which is not
confined). A fork's process may create, write, rename and delete only beneath:

- per lake the fork isolates, on the embedded default: its own catalog folder
  (`<lakes>/<stem>/`, `lake/resolution/fork_catalog.py`) and its data prefix `<root>/__wm_forks/<segment>/`;
  PostgreSQL catalogs and `s3://` data need nothing local (roles and keys guard them). A lake the fork
  *shares* is the fork's to write: its catalog folder and data path;
- the fork's own folder `<state>/workspaces/<segment>/` (its Dagster home and dbt target/log folders,
  `DBT_TARGET_PATH` / `DBT_LOG_PATH` point there) and an explicit `DAGSTER_HOME`;
- a private temp folder (`TMPDIR` points there), the control store's folder (SQLite; nothing for
  PostgreSQL), and the devices `/dev/null`-like files, `/dev/shm`, `/dev/pts`.

`prepare_policy(policy)` creates those folders (and registers the fork's own places in the cleanup
ledger, so a drop removes them) before the launcher confines: a Landlock rule needs an existing folder.
It also carries the dbt project's `partial_parse.msgpack` into the fork's dbt target folder (the
project's `target/` is read-only to the fork; without it every confined dbt run parses from scratch).

What a reader could get wrong: a rule grants a whole tree, so a writable folder that *contains* a
parent's catalog or data path would make them writable. That is refused
(`confinement.writable_covers_parent`), e.g. a control store beside the lakes (`<state>/control.sqlite`
of state dirs made before its folder) or a `DAGSTER_HOME` above them; a fork catalog made beside
the parent's is refused as `confinement.fork_catalog_beside_parent`. Both mean "cannot be confined":
the launcher then warns, or refuses with `forks.require_confinement`.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url

from dpone_dagster.config import DponeConfig, LakeConfig
from dpone_dagster.confinement.landlock import Rule
from dpone_dagster.confinement.status import MARKER_ENV, probe_path
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.errors import DponeError
from dpone_dagster.lake.resolution.attach import absolute_data_path, catalog_location
from dpone_dagster.lake.resolution.fork import LakePorts, PhysicalLake, physical_lake, register_place
from dpone_dagster.lake.resolution.naming import fork_storage_prefix, is_own_folder
from dpone_dagster.lake.state.registry import prepare_catalog_folder
from dpone_dagster.lake.state.tracking import UnknownWorkspaceError, workspace_lake_view
from dpone_dagster.workspaces.dagster_home import default_dagster_home, private_temp_dir, workspace_segment

DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")
DEVICE_TREES = ("/dev/shm", "/dev/pts")
PARTIAL_PARSE_FILE = "partial_parse.msgpack"


class CannotConfineError(DponeError):
    """The configuration puts something the fork must write where a parent's files are."""

    code = "confinement.cannot_confine"


class ForkCatalogBesideParentError(CannotConfineError):
    code = "confinement.fork_catalog_beside_parent"


class WritableCoversParentError(CannotConfineError):
    code = "confinement.writable_covers_parent"


class UnsafeTempDirError(CannotConfineError):
    code = "confinement.unsafe_temp_dir"


@dataclass(frozen=True)
class OwnPlace:
    """A local place of the fork's own lake: registered in the ledger before its folders exist."""

    lake: LakeConfig
    place: PhysicalLake


@dataclass(frozen=True)
class ConfinementPolicy:
    """What one fork's processes may write, and the environment the launcher hands them."""

    workspace: str
    trees: tuple[Path, ...]
    files: tuple[Path, ...]
    protected: tuple[Path, ...]
    env: Mapping[str, str]
    own_places: tuple[OwnPlace, ...] = field(default=(), compare=False)

    def rules(self) -> list[Rule]:
        existing_files = [Rule(p, is_file=True) for p in self.files if p.exists()]
        return [Rule(p) for p in self.trees if p.is_dir()] + existing_files

    def as_json(self) -> dict[str, object]:
        return {
            "workspace": self.workspace,
            "writable_trees": [str(p) for p in self.trees],
            "writable_files": [str(p) for p in self.files],
            "read_only_checked": [str(p) for p in self.protected],
        }


def _local_tree(location: str) -> Path | None:
    return None if "://" in location else Path(location)


def _lake_places(
    config: DponeConfig, workspace: str
) -> Iterator[tuple[LakeConfig, list[Path], list[Path], OwnPlace | None]]:
    """Per configured lake: (lake, writable trees, parent paths that must stay read-only, own place)."""
    for lake in config.all_lakes:
        try:
            view = workspace_lake_view(workspace, lake.name, config, tables=())
        except UnknownWorkspaceError:
            return  # no such fork yet: nothing of a lake is its to write
        own = view.settings[workspace].settings
        if not view.fork_mode:  # shared: the lake is the fork's to write, like a root's
            catalog = catalog_location(own, config.project_root)
            trees = [Path(catalog.target).parent] if catalog.kind == "duckdb" else []
            data = _local_tree(absolute_data_path(own.data_path, config.project_root))
            yield lake, trees + ([data] if data else []), [], None
            continue
        me = physical_lake(workspace, own, config, is_fork=True, incarnation=view.incarnation)
        trees: list[Path] = []
        if me.namespace.catalog.kind == "duckdb":
            catalog_file = Path(me.namespace.catalog.target)
            if not is_own_folder(catalog_file):
                raise ForkCatalogBesideParentError(
                    f"the catalog of fork {workspace!r} (lake {lake.name!r}) was made beside its parent's, in one "
                    "folder, so the kernel cannot let the fork write it alone; drop the fork and create it "
                    "again (a new incarnation gets a folder of its own)"
                )
            trees.append(catalog_file.parent)
        parent_data = absolute_data_path(own.data_path, config.project_root)
        prefix = _local_tree(fork_storage_prefix(workspace, parent_data, view.incarnation))
        trees += [prefix] if prefix else []
        protected = []
        for index, member in enumerate(view.chain[1:], start=1):
            try:
                there = physical_lake(
                    member.id,
                    view.settings[member.id].settings,
                    config,
                    is_fork=view.is_fork_at(index),
                    incarnation=member.incarnation,
                )
            except DponeError:
                continue  # a catalog kind forks cannot attach: never read, never written
            if there.namespace.catalog.kind == "duckdb":
                protected.append(Path(there.namespace.catalog.target))
            protected += [p for p in [_local_tree(there.data_path)] if p]
        yield lake, trees, protected, (OwnPlace(lake, me) if trees else None)


def fork_policy(config: DponeConfig, environ: Mapping[str, str] | None = None) -> ConfinementPolicy | None:
    """The policy of the configured workspace's processes; None for the root (never confined)."""
    environ = os.environ if environ is None else environ
    workspace = config.workspace
    if workspace == ROOT_WORKSPACE:
        return None
    own_folder = config.state_path / "workspaces" / workspace_segment(workspace)
    dagster_home = (
        Path(environ["DAGSTER_HOME"]).expanduser().resolve()
        if environ.get("DAGSTER_HOME")
        else default_dagster_home(config)
    )
    temp = private_temp_dir(config, workspace)
    trees: list[Path] = [own_folder, dagster_home, temp]
    protected: list[Path] = [probe_path(config)]
    places: list[OwnPlace] = []
    for _, lake_trees, lake_protected, place in _lake_places(config, workspace):
        trees += lake_trees
        protected += lake_protected
        places += [place] if place else []
    store = make_url(config.control_store)
    if store.get_backend_name() == "sqlite" and store.database:
        trees.append(Path(store.database).parent)
    trees += [Path(p) for p in DEVICE_TREES]
    unique = tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in trees))
    _refuse_covering(unique, protected)
    env = {
        "TMPDIR": str(temp),
        "DBT_TARGET_PATH": str(own_folder / "dbt" / "target"),
        "DBT_LOG_PATH": str(own_folder / "dbt" / "logs"),
        "DAGSTER_HOME": str(dagster_home),
        MARKER_ENV: workspace,
    }
    return ConfinementPolicy(
        workspace, unique, tuple(Path(p) for p in DEVICE_FILES), tuple(protected), env, tuple(places)
    )


def _refuse_covering(trees: tuple[Path, ...], protected: list[Path]) -> None:
    for path in protected:
        absolute = Path(os.path.abspath(path))
        for tree in trees:
            if absolute == tree or tree in absolute.parents:
                raise WritableCoversParentError(
                    f"a folder this fork's processes must write ({tree.name!r}) contains a file or folder of a "
                    "parent's lake (or the confinement probe), which would become writable too; give it a folder "
                    "of its own (an old state dir's control store: move `control.sqlite*` into `<state>/control/` "
                    "while nothing runs)"
                )


def prepare_policy(policy: ConfinementPolicy, config: DponeConfig) -> None:
    """Create every writable folder (registering the fork's own lake places first) and the temp dir."""
    for own in policy.own_places:
        register_place(policy.workspace, own.lake.name, own.place.settings, own.place, config, LakePorts())
        prepare_catalog_folder(own.place.namespace.catalog)
    temp = Path(policy.env["TMPDIR"])
    for tree in policy.trees:
        if tree == temp:
            _private_dir(temp)
        elif not str(tree).startswith("/dev/"):
            tree.mkdir(parents=True, exist_ok=True)
    _carry_partial_parse(config, Path(policy.env["DBT_TARGET_PATH"]))


def _carry_partial_parse(config: DponeConfig, target: Path) -> None:
    """Copy the dbt project's `partial_parse.msgpack` into the fork's dbt target folder when newer:
    dbt (and dagster-dbt, which copies it into each run's target) looks for it there, and without
    it every confined dbt invocation parses the whole project again."""
    source = config.dbt_project_path / "target" / PARTIAL_PARSE_FILE
    copy = target / PARTIAL_PARSE_FILE
    if source.is_file() and (not copy.is_file() or copy.stat().st_mtime < source.stat().st_mtime):
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy)


def _private_dir(path: Path) -> None:
    """Create `path` mode 0700, or accept it only if it is a real folder of this user's alone."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise UnsafeTempDirError(
            "the fork's private temp folder exists but is not a folder owned by this user alone "
            "(someone else made it first); remove it and start again"
        )
