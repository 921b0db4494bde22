"""The TTL janitor: drop throwaway forks that nobody has used for longer than their TTL.

A fork's idle clock is its `last_used_at` (`lake/state/usage.py`: every resolution — so every run and
`dpone lake sql` — and every `dpone fork status` moves it, at most once a minute), or its creation
time when it was never touched. Its TTL is the one it was created with (`dpone fork create --ttl`),
else the configuration's `forks.ttl`, else the janitor's `--ttl` override when one is given (an
override replaces the configured default only, never a fork's own TTL).

What a reader could get wrong:
- Only throwaway forks (`wm-fork-…` ids, orphaned ones included) are ever reaped. Standing dev
  workspaces and the root are never candidates, whatever their idle time; a throwaway fork with a
  standing dev workspace attached below it is kept (its drop would be refused) and listed as kept.
- `plan()` is the dry run and `run()` drops exactly what `plan()` says, at the same moment of the
  same clock: `run()` re-reads each candidate's idle clock right before its drop, so a fork used
  between the plan and its turn is kept (`reason` says so) rather than dropped from a stale plan.
- The drop is the normal one (`Workspaces.drop`: workspace row first, then the guarded, retried
  namespace cleanup with its ledger). The janitor drops as the fork's owner — an expired TTL is the
  owner's standing instruction — so the permission gate is the owner's; a partial cleanup stays in
  the ledger for `dpone fork drop`, the drop job, or the next janitor pass (which retries nothing
  itself: the fork no longer exists, its ledger rows are retried by any later drop).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.control.workspace_tables import workspace_usage
from dpone_dagster.errors import DponeError, WorkspaceError
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.workspaces import repository as repo
from dpone_dagster.workspaces.service import Workspaces

REAP = "idle past its TTL"


class JanitorNotRootError(WorkspaceError):
    code = "workspace.janitor_not_root"


@dataclass(frozen=True)
class Verdict:
    """One throwaway fork's standing: reaped (`drop`) or kept, with why."""

    workspace_id: str
    owner: str
    last_used_at: str
    idle_seconds: int
    ttl_seconds: int
    ttl_source: str  # "fork", "config", "override"
    drop: bool
    reason: str


@dataclass
class JanitorReport:
    now: str
    dry_run: bool
    verdicts: list[Verdict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (workspace, error code)
    left_for_retry: list[tuple[str, str, str]] = field(default_factory=list)  # (workspace, lake, code)

    @property
    def to_drop(self) -> list[str]:
        return [v.workspace_id for v in self.verdicts if v.drop]

    def as_dict(self) -> dict:
        out = asdict(self)
        out["to_drop"] = self.to_drop
        return out


def _parse(moment: str) -> datetime:
    parsed = datetime.fromisoformat(moment)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass
class Janitor:
    workspaces: Workspaces
    clock: Clock = utc_now
    ttl_override: timedelta | None = None

    def _verdict(self, conn, ws: repo.Workspace, now: datetime) -> Verdict:
        row = conn.execute(
            sa.select(workspace_usage.c.last_used_at, workspace_usage.c.ttl_seconds).where(
                workspace_usage.c.workspace_id == ws.id
            )
        ).first()
        last = row.last_used_at if row is not None else ws.created_at
        if row is not None and row.ttl_seconds:
            ttl, source = int(row.ttl_seconds), "fork"
        elif self.ttl_override is not None:
            ttl, source = int(self.ttl_override.total_seconds()), "override"
        else:
            ttl, source = int(self.workspaces.config.forks.ttl.total_seconds()), "config"
        idle = int((now - _parse(last)).total_seconds()) if last else ttl + 1
        standing = sorted(k.id for k in repo.children(conn, ws.id) if not k.is_throwaway)
        if idle <= ttl:
            reason, drop = f"used {idle}s ago, within its TTL of {ttl}s", False
        elif standing:
            reason, drop = f"idle past its TTL, but standing dev workspaces are attached: {', '.join(standing)}", False
        else:
            reason, drop = f"{REAP}: idle {idle}s > TTL {ttl}s ({source})", True
        return Verdict(ws.id, ws.owner, last, idle, ttl, source, drop, reason)

    def plan(self, now: datetime | None = None) -> JanitorReport:
        """The dry run: every throwaway fork with its verdict, nothing changed."""
        now = now or self.clock()
        report = JanitorReport(now.isoformat(), dry_run=True)
        with self.workspaces.engine.connect() as conn:
            for ws in repo.list_workspaces(conn):
                if ws.is_root or not ws.is_throwaway:
                    continue  # standing dev workspaces and the root are never reaped
                report.verdicts.append(self._verdict(conn, ws, now))
        return report

    def run(self, *, dry_run: bool = False) -> JanitorReport:
        """Drop every fork `plan()` marks, re-checking each one's idle clock right before its drop."""
        now = self.clock()
        report = self.plan(now)
        if dry_run:
            return report
        if self.workspaces.config.workspace != ROOT_WORKSPACE:
            raise JanitorNotRootError(
                f"the janitor drops forks only from the {ROOT_WORKSPACE!r} deployment; this process acts "
                f"for {self.workspaces.config.workspace!r} (a dry run works anywhere)"
            )
        report.dry_run = False
        for index, verdict in enumerate(report.verdicts):
            if not verdict.drop:
                continue
            with self.workspaces.engine.connect() as conn:
                ws = repo.get_workspace(conn, verdict.workspace_id)
                fresh = self._verdict(conn, ws, now) if ws is not None else None
            if fresh is None or not fresh.drop:
                why = "gone before its turn" if fresh is None else f"kept at its turn: {fresh.reason}"
                report.verdicts[index] = Verdict(**{**asdict(verdict), "drop": False, "reason": why})
                continue
            try:
                result = self.workspaces.drop(verdict.workspace_id, actor=verdict.owner)
            except DponeError as exc:
                report.failed.append((verdict.workspace_id, exc.code))
                continue
            report.dropped.append(verdict.workspace_id)
            report.left_for_retry += [(r.workspace_id, r.lake, r.code) for r in result.cleanup.leftovers]
        return report
