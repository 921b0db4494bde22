"""Ordinary capture: every flow workload of a verified source, rebuilt and proven equal to its committed pack.

`capture_ordinary(source, resource_ceiling=...)` reads `flows/<dir>/` of a `SourceReader` (a
`SourceTree` from `release.source`, i.e. the extracted archive) and returns an `OrdinaryCapture`
(`contracts.flows`; its docstring lists every field composition consumes). Steps, each refusing
with a stable `flows.*` code (`FlowError`, defined in `release.packs`):

1. Discover workload directories (each needs `flow.yaml`, `dag.yaml`, `pack.json`; only declared
   SQL files and a README may sit beside them); none at all is empty membership.
2. Parse manifests and DAGs strictly (custom runners, command keys, post-hooks and connection
   credentials get their own codes).
3. Refuse duplicate pack ids, selectors, hook ids and dag ids across workloads, and pre-hook
   dependencies on another workload's hooks.
4. Resolve selector → workload membership: every DAG selects exactly one declared `flow:` selector
   (a `dbt:` or other selector is a cross-constituent reference) and every workload is selected by
   exactly one DAG (nothing is scheduled implicitly).
5. Rebuild each pack from the exact manifest and SQL bytes (`packs.build_pack`: public resources
   within limit and policy ceiling, alias-only connections, logical writes checked against the SQL)
   and compare every executable field, then the fingerprint, with the committed `pack.json`.
6. Refuse two workloads writing the same relation.

The one thing a reader could get wrong: the committed pack is never trusted, only compared. What
the capture reports (commands, resources, digests) comes from the rebuild; the comparison proves the
committed bytes an orchestrator would parse say exactly the same thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.canonical import CanonicalError, loads_canonical
from dpone_dagster.contracts.flows import (
    PRE_HOOK_TASK_PREFIX,
    CapturedFile,
    CapturedHook,
    CapturedWorkload,
    FlowDag,
    FlowManifest,
    FlowPack,
    OrdinaryCapture,
    ResourceCeiling,
    SelectorMember,
)
from dpone_dagster.release.build.packs import (
    DAG_FILE,
    MANIFEST_FILE,
    PACK_FILE,
    RUNTIME_PROGRAM,
    FlowError,
    ResourceCeilingLike,
    build_pack,
    parse_dag,
    parse_manifest,
)
from dpone_dagster.release.source.snapshot import SourceFile, SourceReader

__all__ = ["FlowError", "OrdinaryCapture", "capture_ordinary", "rebuild_packs"]

README_FILE = "README.md"
_TASK_VERBS = {"flow_runtime": "run", "sql_pre_hook": "pre-hook"}


@dataclass(frozen=True)
class _Workload:
    directory: str
    files: Mapping[str, SourceFile]
    manifest: FlowManifest
    dag: FlowDag
    pack: FlowPack


def capture_ordinary(
    source: SourceReader, *, resource_ceiling: ResourceCeilingLike, flows_root: str = "flows"
) -> OrdinaryCapture:
    """Capture and verify every ordinary workload under `flows_root` (see the module docstring)."""
    workloads = _load_workloads(source, resource_ceiling, flows_root, require_pack=True)
    membership = _membership(workloads)
    writers: dict[str, str] = {}
    for workload in workloads:
        pack_path = f"{workload.directory}/{PACK_FILE}"
        verify_committed_pack(source.read_bytes(pack_path), workload.pack, pack_path)
        for relation in workload.pack.logical_writes:
            other = writers.setdefault(relation, workload.manifest.pack_id)
            if other != workload.manifest.pack_id:
                raise FlowError(
                    "flows.duplicate_logical_write",
                    f"workloads {other!r} and {workload.manifest.pack_id!r} both write {relation!r}",
                )
    ceiling = ResourceCeiling(
        max_cpu_millicores=resource_ceiling.max_cpu_millicores, max_memory_bytes=resource_ceiling.max_memory_bytes
    )
    captured = sorted((_captured(workload, membership) for workload in workloads), key=lambda item: item.pack_id)
    return OrdinaryCapture(
        source_snapshot_digest=source.snapshot.digest,
        flows_root=flows_root,
        resource_ceiling=ceiling,
        workloads=tuple(captured),
        selector_membership=tuple(
            sorted(
                (SelectorMember(selector=item.selector, dag_id=item.dag_id, pack_id=item.pack_id) for item in captured),
                key=lambda member: member.selector,
            )
        ),
    )


def rebuild_packs(source: SourceReader, *, ceiling: ResourceCeilingLike, flows_root: str = "flows") -> dict[str, bytes]:
    """Source path of each workload's `pack.json` → the canonical bytes it must hold."""
    workloads = _load_workloads(source, ceiling, flows_root, require_pack=False)
    _membership(workloads)
    return {f"{workload.directory}/{PACK_FILE}": workload.pack.canonical_bytes() for workload in workloads}


def verify_committed_pack(data: bytes, rebuilt: FlowPack, where: str) -> FlowPack:
    """Parse the committed pack strictly and require it to equal the rebuild, field by field."""
    try:
        raw = loads_canonical(data)
    except CanonicalError as error:
        raise FlowError("flows.pack_invalid", f"{where} is not canonical JSON ({error.code})") from None
    tasks = raw.get("tasks") if isinstance(raw, dict) else None
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        kind = task.get("kind")
        if kind not in _TASK_VERBS:
            raise FlowError(
                "flows.unsupported_process_kind", f"{where}: task #{index} has process kind {str(kind)[:40]!r}"
            )
        command = task.get("command")
        if not isinstance(command, list) or command[:2] != [RUNTIME_PROGRAM, _TASK_VERBS[kind]]:
            raise FlowError(
                "flows.arbitrary_command", f"{where}: task #{index} carries a command the generator did not produce"
            )
        if kind == "sql_pre_hook" and task.get("publish_xcom") is not False:
            raise FlowError(
                "flows.pre_hook_publishes_xcom", f"{where}: pre-hook task #{index} must keep publish_xcom=false"
            )
    try:
        committed = FlowPack.from_value(raw)
    except ContractError as error:
        raise FlowError("flows.pack_invalid", f"{where}: {error.message}") from None
    difference = first_difference(
        committed.model_dump(mode="json", by_alias=True, exclude={"fingerprint"}),
        rebuilt.model_dump(mode="json", by_alias=True, exclude={"fingerprint"}),
    )
    if difference is not None:
        raise FlowError("flows.pack_drift", f"{where}: field {difference} differs from the pack rebuilt from source")
    if committed.fingerprint != rebuilt.fingerprint or committed.expected_fingerprint() != committed.fingerprint:
        raise FlowError(
            "flows.pack_fingerprint_mismatch", f"{where}: the fingerprint does not match the pack's content"
        )
    return committed


def first_difference(left: object, right: object, path: str = "") -> str | None:
    """The path of the first place two JSON values differ (`tasks[1].command`), or None."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(left.keys() | right.keys()):
            if key not in left or key not in right:
                return f"{path}.{key}" if path else key
            found = first_difference(left[key], right[key], f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    if isinstance(left, list) and isinstance(right, list):
        for index, (a, b) in enumerate(zip(left, right)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None if len(left) == len(right) else f"{path}[{min(len(left), len(right))}]"
    return None if left == right and type(left) is type(right) else (path or "<document>")


# ---------------------------------------------------------------------------------------------


def _load_workloads(
    source: SourceReader, ceiling: ResourceCeilingLike, flows_root: str, *, require_pack: bool
) -> list[_Workload]:
    groups = _workload_directories(source, flows_root)
    parsed = []
    for directory, files in groups.items():
        required = (MANIFEST_FILE, DAG_FILE, PACK_FILE) if require_pack else (MANIFEST_FILE, DAG_FILE)
        for name in required:
            if f"{directory}/{name}" not in files:
                raise FlowError("flows.missing_source_file", f"{directory} has no {name}")
        manifest = parse_manifest(source.read_bytes(f"{directory}/{MANIFEST_FILE}"), f"{directory}/{MANIFEST_FILE}")
        dag = parse_dag(source.read_bytes(f"{directory}/{DAG_FILE}"), f"{directory}/{DAG_FILE}")
        declared = {
            f"{directory}/{relative}" for relative in (*manifest.sql, *(hook.sql for hook in manifest.pre_hooks))
        }
        allowed = declared | {f"{directory}/{name}" for name in (MANIFEST_FILE, DAG_FILE, PACK_FILE, README_FILE)}
        extra = sorted(set(files) - allowed)
        if extra:
            raise FlowError("flows.undeclared_file", f"{extra[0]} is not declared by {directory}/{MANIFEST_FILE}")
        parsed.append((directory, files, manifest, dag, declared))
    _refuse_duplicates([(manifest, dag) for _, _, manifest, dag, _ in parsed])
    workloads = []
    for directory, files, manifest, dag, declared in parsed:
        sql_sources = {path: source.read_bytes(path) for path in sorted(declared) if path in files}
        pack = build_pack(manifest, workload_dir=directory, sql_sources=sql_sources, ceiling=ceiling)
        workloads.append(_Workload(directory, files, manifest, dag, pack))
    return workloads


def _workload_directories(source: SourceReader, flows_root: str) -> dict[str, dict[str, SourceFile]]:
    groups: dict[str, dict[str, SourceFile]] = {}
    root = flows_root.rstrip("/")
    for item in source.snapshot.under(root):
        rest = item.path[len(root) + 1 :]
        if "/" not in rest:
            if rest == README_FILE:
                continue
            raise FlowError("flows.undeclared_file", f"{item.path} is not inside a workload directory")
        groups.setdefault(f"{root}/{rest.split('/', 1)[0]}", {})[item.path] = item
    if not groups:
        raise FlowError("flows.empty_membership", f"the source holds no ordinary workload under {root}/")
    return dict(sorted(groups.items()))


def _refuse_duplicates(parsed: list[tuple[FlowManifest, FlowDag]]) -> None:
    manifests = [manifest for manifest, _ in parsed]
    checks = [
        ("flows.duplicate_pack_id", "pack id", [m.pack_id for m in manifests]),
        ("flows.duplicate_selector", "selector", [m.selector for m in manifests]),
        ("flows.duplicate_hook_id", "hook id", [hook.id for m in manifests for hook in m.pre_hooks]),
        ("flows.duplicate_dag_id", "dag id", [dag.dag_id for _, dag in parsed]),
    ]
    for code, label, values in checks:
        repeated = sorted(value for value, count in Counter(values).items() if count > 1)
        if repeated:
            raise FlowError(code, f"{label} {repeated[0]!r} is declared more than once")
    owner = {hook.id: m.pack_id for m in manifests for hook in m.pre_hooks}
    for manifest in manifests:
        for hook in manifest.pre_hooks:
            for dependency in hook.after:
                if owner.get(dependency, manifest.pack_id) != manifest.pack_id:
                    raise FlowError(
                        "flows.cross_constituent_dependency",
                        (
                            f"hook {hook.id!r} of {manifest.pack_id!r} depends on hook {dependency!r} of "
                            f"{owner[dependency]!r}"
                        ),
                    )


def _membership(workloads: list[_Workload]) -> dict[str, _Workload]:
    """pack id → the workload whose DAG selects it (exactly one DAG per workload)."""
    by_selector = {workload.manifest.selector: workload for workload in workloads}
    selected_by: dict[str, list[_Workload]] = {workload.manifest.pack_id: [] for workload in workloads}
    for workload in workloads:
        selector = workload.dag.selector
        if not selector.startswith("flow:"):
            raise FlowError(
                "flows.cross_constituent_reference",
                f"DAG {workload.dag.dag_id!r} selects {selector!r}, which is not an ordinary flow",
            )
        target = by_selector.get(selector)
        if target is None:
            raise FlowError(
                "flows.missing_workload",
                f"DAG {workload.dag.dag_id!r} selects {selector!r}, which no workload declares",
            )
        selected_by[target.manifest.pack_id].append(workload)
    for pack_id, dags in selected_by.items():
        if not dags:
            raise FlowError("flows.unscheduled_workload", f"workload {pack_id!r} is selected by no DAG")
        if len(dags) > 1:
            raise FlowError("flows.duplicate_membership", f"workload {pack_id!r} is selected by more than one DAG")
    return {pack_id: dags[0] for pack_id, dags in selected_by.items()}


def _captured_file(item: SourceFile) -> CapturedFile:
    return CapturedFile(path=item.path, content_sha256=item.sha256, size=item.size)


def _captured(workload: _Workload, membership: Mapping[str, _Workload]) -> CapturedWorkload:
    pack = workload.pack
    scheduler = membership[pack.pack_id]
    runtime = next(task for task in pack.tasks if task.kind == "flow_runtime")
    hooks = [task for task in pack.tasks if task.kind == "sql_pre_hook"]
    return CapturedWorkload(
        pack_id=pack.pack_id,
        selector=pack.selector,
        dag_id=scheduler.dag.dag_id,
        schedule=scheduler.dag.schedule,
        fingerprint=pack.fingerprint,
        dag=_captured_file(scheduler.files[f"{scheduler.directory}/{DAG_FILE}"]),
        manifest=_captured_file(workload.files[f"{workload.directory}/{MANIFEST_FILE}"]),
        pack=_captured_file(workload.files[f"{workload.directory}/{PACK_FILE}"]),
        hook_order=tuple(task.hook_id for task in hooks),
        hooks=tuple(
            CapturedHook(
                hook_id=task.hook_id,
                task_id=task.task_id,
                sql=task.sql[0],
                after=tuple(sorted(upstream.removeprefix(PRE_HOOK_TASK_PREFIX) for upstream in task.upstream)),
                command=task.command,
                publish_xcom=False,
            )
            for task in hooks
        ),
        sql=runtime.sql,
        runtime_command=runtime.command,
        logical_writes=pack.logical_writes,
        resources=pack.resources,
        connections=pack.connections,
        source_files=tuple(_captured_file(item) for _, item in sorted(workload.files.items())),
    )
