"""The standard runtime of the dormant deployment: admission first, and a ledger of every port touched.

`deployment_launcher(...)` builds the release services' `StandardRuntimeLauncher` with the ports a
real start would need (init-fetch, credential resolution, source access, writer issuance). Each
port appends one line to the runtime access ledger *before* it does anything, so "zero credential
resolutions" is a fact read back from the ledger (`AccessLedger.entries(run_id=...)`), not a claim
the task makes about itself.

What a reader could get wrong: these ports are real, not decoys. The credential resolver really
reads the alias's credential from the environment (`DPONE_CONNECTION_<ALIAS>`) and the source
reader really reads installed bytes; that is what makes an empty ledger meaningful. They are never
reached because `StandardRuntimeLauncher.launch` calls admission first and admission denies every
development-family task.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpone_dagster.config import resolve_secret
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.release.admission import DenialRecorder, RevocationEpochSource, RuntimeTask, StandardRuntimeLauncher
from dpone_dagster.release.install import InstalledRelease
from dpone_dagster.clock import Clock

_LOCK = threading.Lock()


class RuntimePortError(CodedError):
    codes = {
        "deployment.no_writer": "No writer exists for a development-family task: the standard runtime never executes one in this increment.",
        "deployment.unknown_member": "The task asked for a file that is not a member of the installed release.",
    }


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
            row
            for row in rows
            if (run_id is None or row["run_id"] == run_id) and (port is None or row["port"] == port)
        ]


@dataclass
class _LedgeredPort:
    ledger: AccessLedger
    run_id: str
    installed: InstalledRelease
    task: RuntimeTask

    def _record(self, port: str, detail: str = "") -> None:
        self.ledger.record(
            port=port, run_id=self.run_id, release_id=self.installed.bundle.release_id, task=self.task, detail=detail
        )


class LedgeredInitFetcher(_LedgeredPort):
    def fetch(self, release_id: str, task: RuntimeTask) -> list[str]:
        self._record("init_fetch")
        return sorted(self.installed.bundle.members)


class LedgeredCredentialResolver(_LedgeredPort):
    def resolve(self, alias: str) -> str:
        self._record("credentials", detail=alias)
        return resolve_secret(f"DPONE_CONNECTION_{alias.upper()}")


class LedgeredSourceReader(_LedgeredPort):
    def read(self, release_id: str, path: str) -> bytes:
        self._record("source", detail=path)
        data = self.installed.bundle.members.get(path)
        if data is None:
            raise RuntimePortError("deployment.unknown_member", "that file is not a member of the installed release")
        return data


class LedgeredWriterIssuer(_LedgeredPort):
    def issue(self, release_id: str, task: RuntimeTask) -> Any:
        self._record("writer")
        raise RuntimePortError("deployment.no_writer", "no writer is ever issued to a development-family task")


def deployment_launcher(
    *,
    ledger: AccessLedger,
    run_id: str,
    installed: InstalledRelease,
    task: RuntimeTask,
    clock: Clock,
    epochs: RevocationEpochSource,
    recorder: DenialRecorder | None = None,
) -> StandardRuntimeLauncher:
    """The standard runtime launcher for one task of one run, with ledgered ports."""
    ports = {"ledger": ledger, "run_id": run_id, "installed": installed, "task": task}
    return StandardRuntimeLauncher(
        clock=clock,
        epochs=epochs,
        init_fetcher=LedgeredInitFetcher(**ports),
        credentials=LedgeredCredentialResolver(**ports),
        sources=LedgeredSourceReader(**ports),
        writers=LedgeredWriterIssuer(**ports),
        recorder=recorder,
    )
