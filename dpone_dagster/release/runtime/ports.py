"""The standard runtime's four ports, real and ledgered, and the probe ports of the rollout gate.

`runtime_launcher(...)` builds the release services' `StandardRuntimeLauncher` for one task of one
run with real ports: init-fetch (the task's plan from the verified release), credential resolution
(by alias, from the environment variable the settings name for it: `DPONE_CONNECTION_<ALIAS>` by
default), source access (the release's verified member bytes) and writer issuance (a DuckDB writer
confined to the synthetic runtime's own lake directory). Each port appends one line to the runtime
access ledger *before* it does anything, so "zero credential resolutions" is a fact read back from
the ledger (`AccessLedger.entries(run_id=...)`), and so is "three".

`ProbePorts` are what the rollout gate launches with: each call is counted and refused
(`runtime.gate_probe`), so evaluating admission of a release that is not active yet can never read
a credential or write anything, and a single admitted task shows as a counted port use.

What a reader could get wrong: the development family reaches none of these ports because admission
denies first, not because the ports are decoys. They are the same objects an admitted synthetic task
runs through; only a missing writer directory (configured platforms have no synthetic runtime) makes
writer issuance refuse on its own.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from dpone_dagster.clock import Clock
from dpone_dagster.config import resolve_secret
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.flows import CapturedWorkload
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.release_documents import ORDINARY_CONSTITUENT_KIND
from dpone_dagster.release.build.bundle import sidecar_path
from dpone_dagster.release.runtime.admission import (
    DenialRecorder,
    RevocationEpochSource,
    RuntimeTask,
    StandardRuntimeLauncher,
    SyntheticTargetSource,
    TaskKind,
    TaskPlan,
)
from dpone_dagster.release.runtime.sandbox import SandboxRun, run_sandboxed

PORTS = ("init_fetch", "credentials", "source", "writer")
_LOCK = threading.Lock()
_DATABASE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}\.duckdb$")


class RuntimePortError(CodedError):
    codes = {
        "deployment.no_writer": (
            "No writer exists here: only the embedded default's synthetic runtime has a lake directory to write."
        ),
        "deployment.unknown_member": "The task asked for a file that is not a member of the installed release.",
        "runtime.no_plan": (
            "The task has no executable plan in this release (native dbt tasks are delivered, never executed here)."
        ),
        "runtime.connection_outside_sandbox": (
            "A connection credential does not name a database file of the synthetic runtime's own lake."
        ),
        "runtime.connection_source_missing": "A read connection names a database the synthetic runtime does not have.",
        "runtime.connection_unavailable": (
            "A connection's database could not be opened (for example another run "
            "holds its lock); retry when it is free."
        ),
        "runtime.writer_ambiguous": "A task must have exactly one write connection for the writer to write into.",
        "runtime.statement_failed": "A statement of the task failed; the message names the release file.",
        "runtime.gate_probe": "The rollout gate probes admission only: any port it reaches is counted and refused.",
    }


class RunnableRelease(Protocol):
    """What the ports read: a verified release's identity, ordinary workloads and member bytes."""

    release_id: str
    ordinary: tuple[CapturedWorkload, ...]
    members: Mapping[str, bytes]


@dataclass(frozen=True)
class AccessLedger:
    """Append-only JSON lines: one per port use, with the run that caused it."""

    path: Path

    def record(self, *, port: str, run_id: str, release_id: str, task: RuntimeTask, detail: str = "") -> None:
        line = json.dumps(
            {
                "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "port": port,
                "run_id": run_id,
                "release_id": release_id,
                "task_kind": task.kind.value,
                "workload_id": task.workload_id,
                "hook_id": task.hook_id,
                "detail": detail,
            },
            sort_keys=True,
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def entries(self, *, run_id: str | None = None, port: str | None = None) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        rows = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [
            row for row in rows if (run_id is None or row["run_id"] == run_id) and (port is None or row["port"] == port)
        ]


@dataclass
class _LedgeredPort:
    ledger: AccessLedger
    run_id: str
    release: RunnableRelease
    task: RuntimeTask

    def _record(self, port: str, detail: str = "") -> None:
        self.ledger.record(
            port=port, run_id=self.run_id, release_id=self.release.release_id, task=self.task, detail=detail
        )

    def _workload(self, task: RuntimeTask) -> CapturedWorkload:
        if task.kind is not TaskKind.NATIVE:
            for workload in self.release.ordinary:
                if workload.pack_id == task.workload_id:
                    return workload
        raise RuntimePortError("runtime.no_plan", f"no executable plan for this {task.kind.value} task")


class LedgeredInitFetcher(_LedgeredPort):
    def fetch(self, release_id: str, task: RuntimeTask) -> TaskPlan:
        self._record("init_fetch")
        workload = self._workload(task)
        constituent = digest(ORDINARY_CONSTITUENT_KIND, workload)
        if task.kind is TaskKind.PRE_HOOK:
            refs = [hook.sql for hook in workload.hooks if hook.hook_id == task.hook_id]
            if len(refs) != 1:
                raise RuntimePortError("runtime.no_plan", "the workload has no such pre-hook")
        else:
            refs = list(workload.sql)
        return TaskPlan(
            aliases=tuple(sorted(connection.alias for connection in workload.connections)),
            source_paths=tuple(sidecar_path(constituent, ref.path) for ref in refs),
        )


@dataclass
class LedgeredCredentialResolver(_LedgeredPort):
    env_name: Callable[[str], str] = field(default=lambda alias: f"DPONE_CONNECTION_{alias.upper()}")

    def resolve(self, alias: str) -> str:
        self._record("credentials", detail=alias)
        return resolve_secret(self.env_name(alias))


class LedgeredSourceReader(_LedgeredPort):
    def read(self, release_id: str, path: str) -> bytes:
        self._record("source", detail=path)
        data = self.release.members.get(path)
        if data is None or release_id != self.release.release_id:
            raise RuntimePortError("deployment.unknown_member", "that file is not a member of the installed release")
        return data


@dataclass
class LedgeredWriterIssuer(_LedgeredPort):
    lake_dir: Path | None = None

    def issue(self, release_id: str, task: RuntimeTask) -> SandboxWriter:
        self._record("writer")
        if self.lake_dir is None:
            raise RuntimePortError("deployment.no_writer", "no writer is issued outside the synthetic runtime")
        return SandboxWriter(self.lake_dir, self._workload(task))


@dataclass(frozen=True)
class WriteOutcome:
    statements: int
    rows: dict[str, int]


@dataclass(frozen=True)
class SandboxWriter:
    """Runs a task's statements in a Landlock-confined worker on a locked DuckDB sandbox.

    See `runtime.sandbox`; its connections are attached from its lake only.
    """

    lake_dir: Path
    workload: CapturedWorkload

    def run(self, plan: TaskPlan, credentials: Mapping[str, Any], sources: Sequence[tuple[str, bytes]]) -> WriteOutcome:
        writers = [c.alias for c in self.workload.connections if c.access in ("write", "read_write")]
        if len(writers) != 1:
            raise RuntimePortError("runtime.writer_ambiguous", f"the task has {len(writers)} write connections")
        attachments = []
        for connection in self.workload.connections:
            if connection.alias not in credentials:
                raise RuntimePortError(
                    "runtime.connection_unavailable", f"no credential was resolved for {connection.alias!r}"
                )
            database = self._database(str(credentials[connection.alias]), must_exist=connection.access == "read")
            attachments.append((connection.alias, database.name, connection.access == "read"))
        statements = []
        for path, data in sources:
            try:
                statements.append((path, data.decode("utf-8")))
            except UnicodeDecodeError:
                raise RuntimePortError("runtime.statement_failed", f"{path.split('/', 2)[-1]} is not UTF-8") from None
        run = SandboxRun(str(self.lake_dir), attachments, writers[0], statements, list(self.workload.logical_writes))
        result = run_sandboxed(run)  # a Landlock-confined worker on a locked DuckDB sandbox (`runtime.sandbox`)
        if "error" in result:
            raise RuntimePortError(*result["error"])
        return WriteOutcome(statements=result["statements"], rows=dict(result["rows"]))

    def _database(self, name: str, *, must_exist: bool) -> Path:
        if not _DATABASE_NAME.match(name):
            raise RuntimePortError(
                "runtime.connection_outside_sandbox",
                "a connection must name a <name>.duckdb file of the synthetic lake",
            )
        path = self.lake_dir / name
        if must_exist and not path.is_file():
            raise RuntimePortError("runtime.connection_source_missing", f"the synthetic lake has no {name}")
        return path


def runtime_launcher(
    *,
    ledger: AccessLedger,
    run_id: str,
    release: RunnableRelease,
    task: RuntimeTask,
    clock: Clock,
    epochs: RevocationEpochSource,
    target: SyntheticTargetSource | None = None,
    env_name: Callable[[str], str] | None = None,
    lake_dir: Path | None = None,
    recorder: DenialRecorder | None = None,
) -> StandardRuntimeLauncher:
    """The standard runtime launcher for one task of one run, with real, ledgered ports."""
    ports = {"ledger": ledger, "run_id": run_id, "release": release, "task": task}
    credentials = (
        LedgeredCredentialResolver(**ports, env_name=env_name) if env_name else LedgeredCredentialResolver(**ports)
    )
    return StandardRuntimeLauncher(
        clock=clock,
        epochs=epochs,
        init_fetcher=LedgeredInitFetcher(**ports),
        credentials=credentials,
        sources=LedgeredSourceReader(**ports),
        writers=LedgeredWriterIssuer(**ports, lake_dir=lake_dir),
        recorder=recorder,
        target=target,
    )


@dataclass
class ProbePorts:
    """Ports that count every call and refuse it: the rollout gate never lets a launch do anything."""

    uses: Counter = field(default_factory=Counter)

    def _refuse(self, port: str) -> RuntimePortError:
        self.uses[port] += 1
        return RuntimePortError("runtime.gate_probe", f"the rollout gate refused the {port} port")

    def fetch(self, release_id: str, task: RuntimeTask) -> TaskPlan:
        raise self._refuse("init_fetch")

    def resolve(self, alias: str) -> Any:
        raise self._refuse("credentials")

    def read(self, release_id: str, path: str) -> bytes:
        raise self._refuse("source")

    def issue(self, release_id: str, task: RuntimeTask) -> Any:
        raise self._refuse("writer")

    def launcher(
        self,
        *,
        clock: Clock,
        epochs: RevocationEpochSource,
        target: SyntheticTargetSource | None = None,
        recorder: DenialRecorder | None = None,
    ) -> StandardRuntimeLauncher:
        return StandardRuntimeLauncher(
            clock=clock,
            epochs=epochs,
            init_fetcher=self,
            credentials=self,
            sources=self,
            writers=self,
            recorder=recorder,
            target=target,
        )
