"""The rollout gate: standard-runtime admission of every task of a release, evaluated before activation.

`evaluate_rollout_gate(view, tasks, ...)` launches every task through the real
`StandardRuntimeLauncher` with `ProbePorts` (every port use counted and refused) and returns a
`GateResult`: per task the verdict and typed reason, per kind how many were admitted and denied,
and per port how many uses. It passes only when there is at least one task, none was admitted and no
port was touched. `write_acceptance_report` writes the development-release acceptance report (JSON
and Markdown: release identity, authority expiry, per-task denial reasons, port-use counts) next to
each other under the acceptance directory, atomically, and returns their paths and the JSON digest.

What a reader could get wrong: the gate launches, it does not merely call `admit`. If the launcher
ever let a development task through, the probe ports would count it (and refuse to do anything), so
the gate sees both a wrong decision and a decision taken after a port.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.release.runtime.admission import (
    NO_AUTHORITY_EXPIRY,
    AdmissionView,
    DenialRecorder,
    ExecutionDeniedError,
    RevocationEpochSource,
    SyntheticTargetSource,
)
from dpone_dagster.release.runtime.catalog import DormantTask
from dpone_dagster.release.runtime.ports import PORTS, ProbePorts, RuntimePortError

REPORT_SCHEMA = "dpone.development-acceptance-report.v1"


class RolloutBlockedError(CodedError):
    codes = {
        "release.rollout_blocked": (
            "The rollout gate did not pass (a development task would be admitted, a runtime "
            "port was touched, or there is no task); nothing was installed or activated."
        ),
    }


@dataclass(frozen=True)
class TaskVerdict:
    label: str
    kind: str
    admitted: bool
    reason: str
    message: str


@dataclass(frozen=True)
class GateResult:
    release_id: str
    family: str
    authority_expires_at: str
    evaluated_at: str
    verdicts: tuple[TaskVerdict, ...]
    port_uses: Mapping[str, int]
    identity: Mapping[str, str] = field(default_factory=dict)

    @property
    def admitted(self) -> int:
        return sum(1 for verdict in self.verdicts if verdict.admitted)

    @property
    def denied(self) -> int:
        return len(self.verdicts) - self.admitted

    @property
    def total_port_uses(self) -> int:
        return sum(self.port_uses.values())

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and self.admitted == 0 and self.total_port_uses == 0

    def by_kind(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for verdict in self.verdicts:
            entry = counts.setdefault(verdict.kind, {"admitted": 0, "denied": 0})
            entry["admitted" if verdict.admitted else "denied"] += 1
        return dict(sorted(counts.items()))

    def reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for verdict in self.verdicts:
            if not verdict.admitted:
                counts[verdict.reason] = counts.get(verdict.reason, 0) + 1
        return dict(sorted(counts.items()))

    def summary(self) -> str:
        if self.passed:
            return f"all {len(self.verdicts)} task(s) denied before any credential, source or writer"
        if not self.verdicts:
            return "the release exposes no task to evaluate"
        return (
            f"ROLLOUT BLOCKED: {self.admitted} task(s) admitted, {self.total_port_uses} runtime port use(s) "
            f"of {len(self.verdicts)} task(s)"
        )

    def metadata(self) -> dict[str, str | int]:
        values: dict[str, str | int] = {
            "release_id": self.release_id,
            "family": self.family,
            "authority_expires_at": self.authority_expires_at,
            "tasks": len(self.verdicts),
            "admitted": self.admitted,
            "denied": self.denied,
        }
        for kind, counts in self.by_kind().items():
            values[f"{kind}_tasks"] = counts["admitted"] + counts["denied"]
            values[f"{kind}: admitted"] = counts["admitted"]
            values[f"{kind}: denied"] = counts["denied"]
        values.update({f"denied: {reason}": count for reason, count in self.reasons().items()})
        values.update({f"port uses: {port}": self.port_uses.get(port, 0) for port in PORTS})
        values["credential_resolutions"] = self.port_uses.get("credentials", 0)
        values["runtime_port_uses"] = self.total_port_uses
        return values

    def report(self) -> dict:
        return {
            "schema": REPORT_SCHEMA,
            "verdict": "passed" if self.passed else "blocked",
            "summary": self.summary(),
            "release_id": self.release_id,
            "family": self.family,
            **dict(sorted(self.identity.items())),
            "authority_expires_at": self.authority_expires_at,
            "evaluated_at": self.evaluated_at,
            "counts": {
                "tasks": len(self.verdicts),
                "admitted": self.admitted,
                "denied": self.denied,
                "by_kind": self.by_kind(),
            },
            "port_uses": {port: self.port_uses.get(port, 0) for port in PORTS},
            "tasks": [
                {"task": v.label, "kind": v.kind, "admitted": v.admitted, "reason": v.reason, "message": v.message}
                for v in self.verdicts
            ],
        }


def evaluate_rollout_gate(
    view: AdmissionView,
    tasks: Sequence[DormantTask],
    *,
    clock: Clock,
    epochs: RevocationEpochSource,
    target: SyntheticTargetSource | None = None,
    recorder: DenialRecorder | None = None,
    identity: Mapping[str, str] | None = None,
) -> GateResult:
    """Launch every task against probe ports; collect verdicts and port uses (see the module docstring)."""
    probe = ProbePorts()
    launcher = probe.launcher(clock=clock, epochs=epochs, target=target, recorder=recorder)
    verdicts = []
    for task in tasks:
        try:
            launcher.launch(view, task.runtime_task)
            verdicts.append(TaskVerdict(task.label, task.kind.value, True, "admitted", "the launch completed"))
        except ExecutionDeniedError as denied:
            denial = denied.denial
            verdicts.append(TaskVerdict(task.label, task.kind.value, False, denial.reason.value, denial.message))
        except RuntimePortError as refused:
            verdicts.append(TaskVerdict(task.label, task.kind.value, True, "admitted", refused.message))
    expires = view.authority_expires_at
    return GateResult(
        release_id=view.release_id,
        family=view.authority_family,
        authority_expires_at=format_timestamp(expires) if expires is not None else NO_AUTHORITY_EXPIRY,
        evaluated_at=format_timestamp(clock.now()),
        verdicts=tuple(verdicts),
        port_uses=dict(probe.uses),
        identity=dict(identity or {}),
    )


@dataclass(frozen=True)
class AcceptanceReport:
    json_path: Path
    markdown_path: Path
    json_sha256: str


def write_acceptance_report(result: GateResult, directory: Path) -> AcceptanceReport:
    """Write `<release hex>/<report sha256>.json` and `.md` under `directory`.

    Content-addressed: each evaluation (gate check, install stage, a later run) keeps its own
    report, so the file a stage's metadata links is never overwritten by a later evaluation (whose
    `evaluated_at` differs) and always matches the linked SHA-256.
    """
    data = (json.dumps(result.report(), indent=2, sort_keys=False) + "\n").encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    folder = directory / result.release_id.removeprefix("sha256:")
    folder.mkdir(parents=True, exist_ok=True)
    json_path = _replace(folder / f"{digest}.json", data)
    markdown_path = _replace(folder / f"{digest}.md", render_markdown(result).encode("utf-8"))
    return AcceptanceReport(json_path, markdown_path, digest)


def render_markdown(result: GateResult) -> str:
    report = result.report()
    lines = [
        "# Development release acceptance report",
        "",
        f"**Verdict: {report['verdict'].upper()}** ({report['summary']})",
        "",
        "| field | value |",
        "| --- | --- |",
    ]
    for key in ("release_id", "family", *sorted(result.identity), "authority_expires_at", "evaluated_at"):
        lines.append(f"| {key} | `{report[key]}` |")
    lines += ["", "## Admission by task kind", "", "| kind | admitted | denied |", "| --- | --- | --- |"]
    lines += [f"| {kind} | {c['admitted']} | {c['denied']} |" for kind, c in report["counts"]["by_kind"].items()]
    lines += ["", "## Runtime port uses", "", "| port | uses |", "| --- | --- |"]
    lines += [f"| {port} | {count} |" for port, count in report["port_uses"].items()]
    lines += ["", "## Tasks", "", "| task | kind | admitted | reason |", "| --- | --- | --- | --- |"]
    lines += [
        f"| `{t['task']}` | {t['kind']} | {'yes' if t['admitted'] else 'no'} | `{t['reason']}` |"
        for t in report["tasks"]
    ]
    return "\n".join(lines) + "\n"


def _replace(path: Path, data: bytes) -> Path:
    staged = path.with_name(path.name + ".tmp")
    staged.write_bytes(data)
    staged.replace(path)
    return path
