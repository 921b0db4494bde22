"""Workspaces service: create, drop, list and inspect forks, and flip a fork's lake to shared.

Fork creation clones the parent's per-lake settings, strips any cloned `shared` stamp and stamps
the lakes named in `shared_lakes` (every other lake is isolated — also lakes added to the
configuration later, which a fork does not have rows for). Every creation is a new incarnation of
the id, with its own namespace and data prefix, so a recreated fork never reattaches stale tables.
Before a reused id is created, the leftover ledger rows of its previous incarnations are cleaned as
far as possible; what cannot be cleaned yet stays in the ledger (under the same id) for the next
drop, and does not block the creation.

What a reader could get wrong: dropping deletes the workspace row *first* and cleans physical
namespaces after; a partial cleanup leaves ledger rows that `dpone fork drop ID` (or the Dagster
job) retries later, even though the workspace no longer exists. Only a complete cleanup removes the
fork's embedded Dagster home (`workspaces/dagster_home.py`). Every drop also re-sweeps the
tombstones of *other* workspaces (swept prefixes a late writer may still have written, see
`lake/lifecycle/cleanup.py`); `sweep()` does only that.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE, check_workspace_id
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import MAX_CHAIN_DEPTH, Workspace, set_usage
from dpone_dagster.errors import WorkspaceError
from dpone_dagster.lake.lifecycle.cleanup import CleanupPorts, CleanupReport, drop_fork_namespaces, sweep_tombstones
from dpone_dagster.lake.lifecycle.roles import has_roles
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.state.registry import records, tombstones
from dpone_dagster.lake.state.tracking import UnknownWorkspaceError, forget_workspace
from dpone_dagster.workspaces import repository as repo
from dpone_dagster.workspaces.dagster_home import remove_dagster_home, remove_private_temp_dir
from dpone_dagster.workspaces.dev_servers import require_home_idle
from dpone_dagster.workspaces.permissions import require_may_drop, require_may_grant

log = logging.getLogger(__name__)


class WorkspaceExistsError(WorkspaceError):
    code = "workspace.exists"


class UnknownLakeError(WorkspaceError):
    code = "workspace.unknown_lake"


class RootProtectedError(WorkspaceError):
    code = "workspace.root_protected"


class ChainTooDeepError(WorkspaceError):
    code = "workspace.chain_too_deep"


class DevWorkspacesAttachedError(WorkspaceError):
    code = "workspace.dev_workspaces_attached"


class SharedLakeIsRootError(WorkspaceError):
    code = "workspace.shared_is_root"


def _require_root_named(parent_id: str, shared: set[str], shared_with: str | None) -> None:
    """A shared lake is attached at its configured place — the root's, whatever the parent. Below a
    fork that silently reads and writes the root, so the caller must name the root explicitly."""
    if shared_with is not None and shared_with != ROOT_WORKSPACE:
        raise SharedLakeIsRootError(f"a shared lake is always the root's ({ROOT_WORKSPACE!r}), never {shared_with!r}'s")
    if shared and parent_id != ROOT_WORKSPACE and shared_with != ROOT_WORKSPACE:
        raise SharedLakeIsRootError(
            f"sharing {', '.join(sorted(shared))} below {parent_id!r} would read and write "
            f"{ROOT_WORKSPACE!r}, not {parent_id!r}; name the root explicitly "
            f"(shared_with={ROOT_WORKSPACE!r}, `--shared-with {ROOT_WORKSPACE}`) if that is meant"
        )


@dataclass(frozen=True)
class DropResult:
    workspace_id: str
    workspace_deleted: bool
    orphaned: tuple[str, ...]
    cleanup: CleanupReport
    others_swept: CleanupReport = field(default_factory=CleanupReport)  # other workspaces' tombstones
    dagster_home_removed: str | None = None  # the fork's embedded Dagster home, once cleanup succeeded
    temp_dir_removed: str | None = None  # the fork's private temporary folder, once cleanup succeeded
    servers_stopped: tuple[str, ...] = ()  # the fork's own `dpone dev` processes a drop with stop ended


@dataclass(frozen=True)
class WorkspaceSummary:
    id: str
    parent_id: str | None
    owner: str
    kind: str
    orphaned: bool
    shared_lakes: tuple[str, ...] = ()
    pending_cleanup: int = 0
    deleted: bool = False
    tombstones: int = 0  # swept prefixes still re-swept by later cleanups


@dataclass
class Workspaces:
    """The service, bound to one configuration (and its control store)."""

    config: DponeConfig = field(default_factory=load_config)
    clock: Clock = utc_now
    cleanup_ports: CleanupPorts | None = None

    @property
    def engine(self):
        return open_store(self.config.control_store)

    def _now(self) -> str:
        return self.clock().isoformat()

    def _ports(self) -> CleanupPorts:
        return replace(self.cleanup_ports or CleanupPorts(), clock=self.clock)

    def sweep(self) -> CleanupReport:
        """Re-sweep every workspace's tombstones (`dpone fork sweep`); no workspace is touched."""
        return sweep_tombstones(config=self.config, ports=self._ports())

    def create_fork(
        self,
        workspace_id: str,
        parent_id: str,
        *,
        owner: str,
        shared_lakes: Iterable[str] = (),
        shared_with: str | None = None,
        ttl: timedelta | None = None,
        pin: bool = False,
    ) -> Workspace:
        """Create fork `workspace_id` of `parent_id` as a new incarnation of that id.

        `shared_lakes` are attached where the root keeps them; below a fork that is refused unless
        `shared_with` names the root. `ttl`: how long the fork may stay idle before the TTL janitor
        drops it (default: the configuration's `forks.ttl`; only throwaway forks are ever reaped)."""
        check_workspace_id(workspace_id)
        check_workspace_id(parent_id)
        if workspace_id == ROOT_WORKSPACE:
            raise RootProtectedError("the root workspace cannot be created as a fork")
        if not owner or not owner.strip():
            raise WorkspaceError("a fork needs an owner", code="workspace.owner_required")
        shared = set(shared_lakes)
        _require_root_named(parent_id, shared, shared_with)
        ttl_seconds = _ttl_seconds(ttl)
        with self.engine.begin() as conn:
            repo.ensure_root(conn, self._now())
            if repo.get_workspace(conn, workspace_id) is not None:
                raise WorkspaceExistsError(f"workspace {workspace_id!r} already exists")
            chain = repo.ancestor_chain(conn, parent_id)
            if not chain:
                raise UnknownWorkspaceError(f"parent workspace {parent_id!r} does not exist")
            if len(chain) >= MAX_CHAIN_DEPTH:
                raise ChainTooDeepError(f"forks nest at most {MAX_CHAIN_DEPTH} deep")
            parent_lakes = repo.lake_settings(conn, [parent_id], self.config)[parent_id]
        unknown = sorted(shared - set(parent_lakes))
        if unknown:
            raise UnknownLakeError(f"no lake named {', '.join(map(repr, unknown))} in the parent")

        leftover = drop_fork_namespaces(
            workspace_id,
            config=self.config,
            include_deleted_children=False,
            credential_donor=parent_id,
            ports=self._ports(),
        )
        if leftover.leftovers:
            log.warning(
                "fork %s: %d namespace(s) of earlier incarnations stay pending cleanup (%s)",
                workspace_id,
                len(leftover.leftovers),
                ", ".join(sorted({r.code for r in leftover.leftovers})),
            )
        created = Workspace(workspace_id, parent_id, owner, self._now(), repo.new_incarnation())
        lakes = [(s.settings, name in shared) for name, s in sorted(parent_lakes.items())]
        try:
            with self.engine.begin() as conn:
                forget_workspace(conn, workspace_id)
                repo.insert_workspace(conn, created, lakes)
                set_usage(conn, workspace_id, created.created_at, ttl_seconds)
        except sa.exc.IntegrityError:
            raise WorkspaceExistsError(f"workspace {workspace_id!r} already exists") from None
        for settings, is_shared in lakes:
            if not is_shared and settings.catalog_kind == "postgres":
                _provision_catalog_roles(workspace_id, settings.name, self.config)
        self._pin_created(workspace_id, lakes, pin)
        return created

    def _pin_created(self, workspace_id: str, lakes, pin: bool) -> None:
        """`pin` (or a lake's `defer: pinned`): pin each isolated lake at its ancestors' snapshots now.
        A pin that cannot be read is refused (`lake.pin_unavailable`) after creation: the fork
        exists and reads live until `dpone fork repin` succeeds."""
        from dpone_dagster.lake.resolution.pins import pin_lake

        for settings, is_shared in lakes:
            if not is_shared and (pin or settings.defer == "pinned"):
                pin_lake(workspace_id, settings.name, self.config, clock=self.clock)

    def repin(self, workspace_id: str, lake: str | None = None, *, actor: str) -> dict[str, dict[str, int]]:
        """Move the pins of a fork's pinned lakes (or of `lake`, pinning it if it was live) to the
        ancestors' current snapshots. Returns lake -> ancestor -> new pinned snapshot."""
        from dpone_dagster.lake.resolution.pins import pin_lake, pins

        check_workspace_id(workspace_id)
        with self.engine.begin() as conn:
            ws = repo.get_workspace(conn, workspace_id)
            if ws is None:
                raise UnknownWorkspaceError(f"workspace {workspace_id!r} does not exist")
            require_may_drop(conn, ws, actor)
            names = (
                [lake] if lake else [each.name for each in self.config.all_lakes if pins(conn, workspace_id, each.name)]
            )
        if lake is not None:
            self.config.lake(lake)
        return {name: pin_lake(workspace_id, name, self.config, clock=self.clock) for name in names}

    def drop(self, workspace_id: str, *, actor: str, stop_servers: bool = False) -> DropResult:
        """Delete a fork and clean its namespaces; retry cleanup when it is already deleted. Refused
        (`workspace.in_use`) while the fork's own `dpone dev` runs, unless `stop_servers` stops it first."""
        check_workspace_id(workspace_id)
        if workspace_id == ROOT_WORKSPACE:
            raise RootProtectedError("the root workspace cannot be dropped")
        with self.engine.connect() as conn:  # every refusal before any server is stopped
            self._droppable(conn, workspace_id, actor)
        stopped = tuple(str(process) for process in require_home_idle(self.config, workspace_id, stop=stop_servers))
        with self.engine.begin() as conn:
            ws, orphaned = self._droppable(conn, workspace_id, actor)
            if ws is None:
                donor = None
            else:
                if ws.incarnation:
                    repo.set_incarnation_state(conn, ws.id, ws.incarnation, repo.DROPPING, self._now())
                repo.delete_workspace(conn, ws, self._now())
                forget_workspace(conn, workspace_id)
                donor = ws.parent_id
        report = drop_fork_namespaces(workspace_id, config=self.config, credential_donor=donor, ports=self._ports())
        others = sweep_tombstones(config=self.config, ports=self._ports(), exclude=(workspace_id,))
        if report.complete:
            with self.engine.begin() as conn:
                current = repo.incarnation_state(conn, workspace_id)
                if current is not None and current[1] == repo.DROPPING:
                    repo.set_incarnation_state(conn, workspace_id, current[0], repo.DROPPED, self._now())
            home = remove_dagster_home(self.config, workspace_id)
            temp = remove_private_temp_dir(self.config, workspace_id)
        else:
            home = temp = None
        return DropResult(
            workspace_id,
            ws is not None,
            orphaned,
            report,
            others,
            str(home) if home else None,
            str(temp) if temp else None,
            stopped,
        )

    def _droppable(self, conn, workspace_id: str, actor: str) -> tuple[Workspace | None, tuple[str, ...]]:
        """The fork to drop (None: already deleted, cleanup left) and its throwaway children, or the refusal."""
        ws = repo.get_workspace(conn, workspace_id)
        if ws is None:
            if (
                not records(conn, [workspace_id])
                and not tombstones(conn, [workspace_id])
                and not has_roles(conn, [workspace_id])
                and not repo.deleted_children(conn, workspace_id)
            ):
                raise UnknownWorkspaceError(f"workspace {workspace_id!r} does not exist")
            return None, ()
        require_may_drop(conn, ws, actor)
        kids = repo.children(conn, workspace_id)
        standing = sorted(k.id for k in kids if not k.is_throwaway)
        if standing:
            raise DevWorkspacesAttachedError(
                (
                    f"standing dev workspaces are attached to {workspace_id!r}: {', '.join(standing)}; drop or "
                    "re-home them first"
                )
            )
        return ws, tuple(sorted(k.id for k in kids))

    def set_lake_shared(
        self, workspace_id: str, lake: str, shared: bool, *, actor: str, shared_with: str | None = None
    ) -> None:
        """Flip one lake of a fork between shared and isolated. Ledger rows stay in place.

        Sharing below a fork needs `shared_with` to name the root (see `create_fork`)."""
        check_workspace_id(workspace_id)
        if workspace_id == ROOT_WORKSPACE:
            raise RootProtectedError("the root workspace always owns its lakes")
        with self.engine.begin() as conn:
            ws = repo.get_workspace(conn, workspace_id)
            if ws is None:
                raise UnknownWorkspaceError(f"workspace {workspace_id!r} does not exist")
            require_may_drop(conn, ws, actor)
            if shared:
                _require_root_named(ws.parent_id or "", {lake}, shared_with)
            lakes = repo.lake_settings(conn, [workspace_id], self.config)[workspace_id]
            if lake not in lakes:
                raise UnknownLakeError(f"workspace {workspace_id!r} has no lake {lake!r}")
            repo.set_shared(conn, workspace_id, lakes[lake].settings, shared)

    def grant_admin(self, workspace_id: str, actor: str, *, granted_by: str) -> None:
        check_workspace_id(workspace_id)
        with self.engine.begin() as conn:
            repo.ensure_root(conn, self._now())
            if repo.get_workspace(conn, workspace_id) is None:
                raise UnknownWorkspaceError(f"workspace {workspace_id!r} does not exist")
            require_may_grant(conn, workspace_id, granted_by)
            repo.grant_admin(conn, workspace_id, actor)

    def list(self) -> list[WorkspaceSummary]:
        from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
        from dpone_dagster.control.lake_tables import fork_prefix_tombstone as swept
        from dpone_dagster.control.workspace_tables import workspace_lake, workspace_tombstone

        with self.engine.connect() as conn:
            rows = repo.list_workspaces(conn)
            shared: dict[str, list[str]] = {}
            for ws, lake in conn.execute(
                sa.select(workspace_lake.c.workspace_id, workspace_lake.c.lake).where(workspace_lake.c.shared.is_(True))
            ):
                shared.setdefault(ws, []).append(lake)
            pending = dict(
                conn.execute(sa.select(ledger.c.workspace_id, sa.func.count()).group_by(ledger.c.workspace_id)).all()
            )
            swept_count = dict(
                conn.execute(sa.select(swept.c.workspace_id, sa.func.count()).group_by(swept.c.workspace_id)).all()
            )
            deleted_parents = {r.workspace_id: r.parent_id for r in conn.execute(sa.select(workspace_tombstone))}
        out = [
            WorkspaceSummary(
                id=w.id,
                parent_id=w.parent_id,
                owner=w.owner,
                kind=_kind(w),
                orphaned=w.is_throwaway and w.parent_id is None,
                shared_lakes=tuple(sorted(shared.get(w.id, ()))),
                pending_cleanup=pending.get(w.id, 0),
                tombstones=swept_count.get(w.id, 0),
            )
            for w in rows
        ]
        live = {w.id for w in rows}
        out += [
            WorkspaceSummary(
                ws,
                deleted_parents.get(ws),
                "",
                "deleted",
                False,
                (),
                pending.get(ws, 0),
                deleted=True,
                tombstones=swept_count.get(ws, 0),
            )
            for ws in sorted(set(pending) | set(swept_count))
            if ws not in live
        ]
        return out


def _provision_catalog_roles(workspace_id: str, lake: str, config: DponeConfig) -> None:
    """Give a new fork its PostgreSQL writer/reader roles now, while the admin credential is here
    (see `lake/lifecycle/roles.py`). A failure is logged, not raised: the fork's first resolution retries,
    and refuses to attach (`lake.fork_roles_missing`) while the roles cannot be made."""
    from dpone_dagster.errors import DponeError
    from dpone_dagster.lake.lifecycle.roles import provision
    from dpone_dagster.lake.resolution.fork import ForkCatalogUnsupportedError, physical_lake
    from dpone_dagster.lake.state.tracking import workspace_lake_view

    try:
        view = workspace_lake_view(workspace_id, lake, config)
        if not view.fork_mode:
            return
        me = physical_lake(
            workspace_id, view.settings[workspace_id].settings, config, is_fork=True, incarnation=view.incarnation
        )
        ancestors = []
        for index, member in enumerate(view.chain[1:], start=1):
            try:
                ancestors.append(
                    physical_lake(
                        member.id,
                        view.settings[member.id].settings,
                        config,
                        is_fork=view.is_fork_at(index),
                        incarnation=member.incarnation,
                    )
                )
            except ForkCatalogUnsupportedError:
                continue
        provision(me, ancestors, config)
    except DponeError as exc:
        log.warning("catalog roles of fork %s (lake %s) not provisioned: %s", workspace_id, lake, exc.code)


def _ttl_seconds(ttl: timedelta | None) -> int | None:
    if ttl is None:
        return None
    if ttl.total_seconds() < 60:
        raise WorkspaceError("a fork's TTL must be at least one minute", code="workspace.invalid_ttl")
    return int(ttl.total_seconds())


def _kind(ws: Workspace) -> str:
    if ws.is_root:
        return "root"
    return "throwaway" if ws.is_throwaway else "dev"
