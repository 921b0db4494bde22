"""The task catalogue of an installed release: every task the standard runtime could be asked to start.

`dormant_tasks(bundle)` turns a verified development `ReleaseBundle` into one `DormantTask` per task:
a native task per delivered dbt node, and per ordinary workload its SQL pre-hooks (in dependency
order) followed by its flow runtime. `synthetic_tasks(workloads)` does the same for the ordinary
workloads of a synthetic-family release (it has no native task). Each task carries what a user needs
to recognise it in the UI (selector, public resources, connection aliases, hook position), its
`family`, and the exact `RuntimeTask` that admission decides on.

What a reader could get wrong: a `DormantTask` is a description, not a permission. Nothing here
resolves a connection alias or reads a source file; the aliases are the alias-only projection the
release carries. Admission alone decides, at launch (it refuses every development-family task).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

from dpone_dagster.contracts.flows import CapturedWorkload
from dpone_dagster.release.build.bundle import ReleaseBundle
from dpone_dagster.release.runtime.admission import DEVELOPMENT_FAMILY, SYNTHETIC_FAMILY, RuntimeTask, TaskKind

_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


@dataclass(frozen=True)
class DormantTask:
    """One task of an installed release, as the dormant deployment shows it."""

    runtime_task: RuntimeTask
    selector: str
    project_or_pack: str
    resources: dict[str, int]
    connection_aliases: tuple[str, ...]
    hook_position: int | None
    hook_order: tuple[str, ...]
    upstream_hooks: tuple[str, ...]
    logical_writes: tuple[str, ...]
    family: str = DEVELOPMENT_FAMILY

    @property
    def kind(self) -> TaskKind:
        return self.runtime_task.kind

    @property
    def label(self) -> str:
        task = self.runtime_task
        return f"{task.kind.value}:{task.workload_id}" + (f":{task.hook_id}" if task.hook_id else "")

    def metadata(self) -> dict[str, str | int]:
        """Secret-free facts for the UI; connection aliases are names only."""
        values: dict[str, str | int] = {
            "family": self.family,
            "task_kind": self.kind.value,
            "workload_id": self.runtime_task.workload_id,
            "selector": self.selector,
            "constituent": self.project_or_pack,
            "connection_aliases": ", ".join(self.connection_aliases) or "(none)",
            "logical_writes": ", ".join(self.logical_writes) or "(none)",
            "hook_order": " -> ".join(self.hook_order) or "(no pre-hooks)",
        }
        if self.runtime_task.hook_id is not None:
            values["hook_id"] = self.runtime_task.hook_id
            values["hook_position"] = f"{self.hook_position} of {len(self.hook_order)}"
            values["runs_after"] = ", ".join(self.upstream_hooks) or "(first)"
            values["publish_xcom"] = str(self.runtime_task.publish_xcom).lower()
        values.update({f"resources.{name}": amount for name, amount in sorted(self.resources.items())})
        return values


def dormant_tasks(bundle: ReleaseBundle) -> tuple[DormantTask, ...]:
    """Every task of `bundle`: native nodes first (sorted), then each workload's hooks and runtime."""
    tasks: list[DormantTask] = []
    for document in bundle.native:
        for project in document.projects:
            for node in project.nodes:
                tasks.append(
                    DormantTask(
                        runtime_task=RuntimeTask(kind=TaskKind.NATIVE, workload_id=node.unique_id),
                        selector=f"dbt:{project.project_name}:{node.unique_id}",
                        project_or_pack=project.project_name,
                        resources={},
                        connection_aliases=(),
                        hook_position=None,
                        hook_order=(),
                        upstream_hooks=(),
                        logical_writes=(),
                    )
                )
    for workload in bundle.ordinary:
        tasks.extend(_ordinary_tasks(workload, DEVELOPMENT_FAMILY))
    return tuple(tasks)


def synthetic_tasks(workloads: tuple[CapturedWorkload, ...]) -> tuple[DormantTask, ...]:
    """Every task of a synthetic-family release: each workload's hooks, then its runtime (no native task)."""
    return tuple(task for workload in workloads for task in _ordinary_tasks(workload, SYNTHETIC_FAMILY))


def _ordinary_tasks(workload: CapturedWorkload, family: str) -> list[DormantTask]:
    resources = {
        "requests.cpu_millicores": workload.resources.requests.cpu_millicores,
        "requests.memory_bytes": workload.resources.requests.memory_bytes,
        "limits.cpu_millicores": workload.resources.limits.cpu_millicores,
        "limits.memory_bytes": workload.resources.limits.memory_bytes,
    }
    aliases = tuple(f"{c.alias} ({c.conn_type}, {c.access})" for c in workload.connections)
    common = {
        "selector": workload.selector,
        "project_or_pack": workload.pack_id,
        "resources": resources,
        "connection_aliases": aliases,
        "hook_order": tuple(workload.hook_order),
        "logical_writes": tuple(workload.logical_writes),
        "family": family,
    }
    tasks = [
        DormantTask(
            runtime_task=RuntimeTask(
                kind=TaskKind.PRE_HOOK,
                workload_id=workload.pack_id,
                hook_id=hook.hook_id,
                publish_xcom=hook.publish_xcom,
            ),
            hook_position=position,
            upstream_hooks=tuple(hook.after),
            **common,
        )
        for position, hook in enumerate(workload.hooks, start=1)
    ]
    tasks.append(
        DormantTask(
            runtime_task=RuntimeTask(kind=TaskKind.ORDINARY, workload_id=workload.pack_id),
            hook_position=None,
            upstream_hooks=tuple(workload.hook_order),
            **common,
        )
    )
    return tasks


def job_names(tasks: tuple[DormantTask, ...]) -> tuple[str, ...]:
    """A valid, unique, deterministic Dagster job name per task, in the order of `tasks`.

    Names read as `<kind>__<workload>[__<hook>]` (a hook id's `<workload>.` prefix is dropped) with
    every run of non-identifier characters turned into `_`; tasks whose readable names collide get
    the first 8 hex of a SHA-256 of their label.
    """
    readable = [_readable_name(task) for task in tasks]
    counts = Counter(readable)
    return tuple(
        f"{name}__{hashlib.sha256(task.label.encode()).hexdigest()[:8]}" if counts[name] > 1 else name
        for task, name in zip(tasks, readable, strict=True)
    )


def _readable_name(task: DormantTask) -> str:
    workload = task.runtime_task.workload_id
    parts = [task.kind.value, workload]
    if task.runtime_task.hook_id:
        parts.append(task.runtime_task.hook_id.removeprefix(workload + "."))
    return "__".join(_UNSAFE.sub("_", part).strip("_") or "x" for part in parts)
