"""FABRICATED TEST INPUTS (never shipped): hand-made release inputs and a synthetic delivery target.

This module lives under `tests/` on purpose: nothing in `dpone_dagster` may import it (the import
graph test, `test_import_graph.py`, fails if anything does). Tests and the bench import it as
`tests.release.fabricated`.

- `MemorySource`: a verified in-memory source snapshot (same `snapshot` / `read_bytes` shape as
  `SourceTree`), so composition can be exercised without a checkout;
- `synthetic_workload(...)`: a captured ordinary workload with its exact source files (a
  hand-written `pack.json`, no pack builder);
- `synthetic_native(...)`: a native compilation shaped like `compile_native`'s output but with no
  dbt at all, for tests that need many fast compositions. Anything claimed about the real
  compiled project is proven on the real compile instead (`test_real_release.py`);
- `SyntheticTarget`: the synthetic authority (`dpone_dagster.authority.synthetic`) plus a live
  current-target verifier (`ControllableCurrentTarget`) whose policy and epoch tests can change,
  and a real `ReceiptIssuer`.

The one thing a reader could get wrong: a release built here proves nothing about dbt or the flow
capture; it is derived from public labels and a fixed clock, and nothing it produces is authority
for a real target.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dpone_dagster.authority.memory import ControllableCurrentTarget
from dpone_dagster.authority.synthetic import (
    SYNTHETIC_COMMIT,
    SYNTHETIC_ENVIRONMENT,
    SYNTHETIC_REPOSITORY,
    SyntheticAuthority,
)
from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.authority.verification import ReconstructedSource, verify_grant
from dpone_dagster.contracts.canonical import dumps
from dpone_dagster.contracts.flows import (
    PACK_FINGERPRINT_KIND,
    CapturedFile,
    CapturedHook,
    CapturedWorkload,
    ConnectionProjection,
    OrdinaryCapture,
    PublicResources,
    ResourceCeiling,
    ResourceQuantity,
    SelectorMember,
    SqlFileRef,
)
from dpone_dagster.contracts.grant import ExecutionSubject, GrantSignatures
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.receipts import (
    ActivationPurpose,
    ActivationReceipt,
    DevelopmentAuthorityReceipt,
    MaterializationReceipt,
    PublicationReceipt,
)
from dpone_dagster.contracts.release_documents import SELECTION_KIND
from dpone_dagster.contracts.target import DeploymentProjection, TargetConfiguration
from dpone_dagster.release.build.bundle import ReleaseBundle, content_sha256, deployment_projection
from dpone_dagster.release.build.compose import compose_release
from dpone_dagster.release.build.native import (
    NativeCompilation,
    NativeNode,
    NativeProject,
    SourceFile,
    compile_profile_digest,
)
from dpone_dagster.release.source.snapshot import SourceFile as SnapshotFile
from dpone_dagster.release.source.snapshot import SourceSnapshot


class MemorySource:
    """A source snapshot held in memory; `read_bytes` re-verifies like `SourceTree.read_bytes`."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)
        self._snapshot = SourceSnapshot(
            tuple(SnapshotFile(path=p, sha256=content_sha256(d), size=len(d)) for p, d in sorted(self.files.items()))
        )

    @property
    def snapshot(self) -> SourceSnapshot:
        return self._snapshot

    def read_bytes(self, path: str) -> bytes:
        entry = self._snapshot.get(path)
        data = self.files.get(path)
        if entry is None or data is None or content_sha256(data) != entry.sha256:
            raise KeyError("not part of the verified snapshot")
        return data


def _captured(path: str, data: bytes) -> CapturedFile:
    return CapturedFile(path=path, content_sha256=content_sha256(data), size=len(data))


def synthetic_workload_files(pack_id: str, writes: Sequence[str], hooks: Sequence[str] = ()) -> dict[str, bytes]:
    """The exact source files of one synthetic ordinary workload under `flows/<pack_id>/`."""
    root = f"flows/{pack_id}"
    files = {
        f"{root}/flow.yaml": f"pack_id: {pack_id}\nwrites: {sorted(writes)}\n".encode(),
        f"{root}/dag.yaml": f"dag_id: {pack_id}\nschedule: manual\n".encode(),
        f"{root}/pack.json": f'{{"pack_id":"{pack_id}"}}'.encode(),
        f"{root}/sql/run.sql": "".join(f"insert into {w} select 1;\n" for w in writes).encode(),
    }
    for hook in hooks:
        files[f"{root}/sql/{hook}.sql"] = f"create schema if not exists {hook};\n".encode()
    return files


def synthetic_workload(
    pack_id: str,
    writes: Sequence[str],
    hooks: Sequence[str] = (),
    *,
    files: Mapping[str, bytes] | None = None,
    selector: str | None = None,
    cpu_millicores: int = 250,
) -> CapturedWorkload:
    """A captured ordinary workload over `synthetic_workload_files` (or the given `files`)."""
    files = dict(files or synthetic_workload_files(pack_id, writes, hooks))
    root = f"flows/{pack_id}"
    run_sql = SqlFileRef(path=f"{root}/sql/run.sql", content_sha256=content_sha256(files[f"{root}/sql/run.sql"]))
    captured_hooks = []
    for index, hook in enumerate(hooks):
        path = f"{root}/sql/{hook}.sql"
        captured_hooks.append(
            CapturedHook(
                hook_id=hook,
                task_id=f"pre_hook.{hook}",
                sql=SqlFileRef(path=path, content_sha256=content_sha256(files[path])),
                after=tuple(hooks[:index][-1:]),
                command=("dpone-flow", "pre-hook", "--pack", pack_id, "--hook", hook),
                publish_xcom=False,
            )
        )
    own = {path: data for path, data in files.items() if path.startswith(root + "/")}
    return CapturedWorkload(
        pack_id=pack_id,
        selector=selector or f"flow:{pack_id}",
        dag_id=pack_id,
        schedule="manual",
        fingerprint=digest(
            PACK_FINGERPRINT_KIND, {"synthetic": pack_id, "files": sorted(map(content_sha256, own.values()))}
        ),
        dag=_captured(f"{root}/dag.yaml", files[f"{root}/dag.yaml"]),
        manifest=_captured(f"{root}/flow.yaml", files[f"{root}/flow.yaml"]),
        pack=_captured(f"{root}/pack.json", files[f"{root}/pack.json"]),
        hook_order=tuple(hooks),
        hooks=tuple(captured_hooks),
        sql=(run_sql,),
        runtime_command=("dpone-flow", "run", "--pack", pack_id),
        logical_writes=tuple(sorted(writes)),
        resources=PublicResources(
            requests=ResourceQuantity(cpu_millicores=cpu_millicores, memory_bytes=256 * 2**20),
            limits=ResourceQuantity(cpu_millicores=cpu_millicores * 2, memory_bytes=512 * 2**20),
        ),
        connections=(ConnectionProjection(alias="warehouse", conn_type="ducklake", access="write", parameters=()),),
        source_files=tuple(_captured(path, data) for path, data in sorted(own.items())),
    )


def synthetic_capture(snapshot_digest: str, workloads: Iterable[CapturedWorkload]) -> OrdinaryCapture:
    ordered = sorted(workloads, key=lambda item: item.pack_id)
    return OrdinaryCapture(
        source_snapshot_digest=snapshot_digest,
        flows_root="flows",
        resource_ceiling=ResourceCeiling(max_cpu_millicores=2_000, max_memory_bytes=4 * 2**30),
        workloads=ordered,
        selector_membership=sorted(
            (SelectorMember(selector=w.selector, dag_id=w.dag_id, pack_id=w.pack_id) for w in ordered),
            key=lambda m: m.selector,
        ),
    )


def synthetic_native_files(project: str, models: Sequence[str]) -> dict[str, bytes]:
    files = {f"{project}/dbt_project.yml": f"name: {project}\nprofile: {project}\n".encode()}
    for model in models:
        files[f"{project}/models/{model}.sql"] = f"select 1 as id -- {model}\n".encode()
    return files


def synthetic_native(
    files: Mapping[str, bytes], snapshot_digest: str, project: str, models: Mapping[str, str]
) -> NativeCompilation:
    """A native compilation of `models` (name → logical write) shaped like `compile_native`'s output."""
    nodes = tuple(
        NativeNode(
            unique_id=f"model.{project}.{name}",
            resource_type="model",
            original_file_path=f"models/{name}.sql",
            dbt_checksum=content_sha256(files[f"{project}/models/{name}.sql"].strip()),
            compiled_sha256=content_sha256(files[f"{project}/models/{name}.sql"]),
            materialized="table",
            logical_write=write,
            depends_on=(),
        )
        for name, write in sorted(models.items())
    )
    closure = tuple(
        SourceFile(path=path, content_sha256=content_sha256(data), size=len(data))
        for path, data in sorted(files.items())
        if path.startswith(project + "/")
    )
    selection = dumps({"project": project, "path": project, "nodes": [node.as_json() for node in nodes]})
    return NativeCompilation(
        source_snapshot_digest=snapshot_digest,
        dbt_version="synthetic",
        adapter_version="synthetic",
        profile_digest=compile_profile_digest(),
        projects=(
            NativeProject(
                name=project,
                path=project,
                selection=("--select", "fqn:*"),
                selected=tuple(node.unique_id for node in nodes),
                nodes=nodes,
                closure=closure,
                project_file_sha256=content_sha256(files[f"{project}/dbt_project.yml"]),
                selection_document=selection,
                selection_fingerprint=digest(SELECTION_KIND, selection),
            ),
        ),
    )


@dataclass
class SyntheticTarget:
    """A synthetic non-production target: authority, live verifier, receipt issuer."""

    authority: SyntheticAuthority = field(default_factory=SyntheticAuthority)
    live: ControllableCurrentTarget = field(init=False)
    issuer: ReceiptIssuer = field(init=False)

    def __post_init__(self) -> None:
        self.live = ControllableCurrentTarget(self.authority.policy_digest)
        self.issuer = ReceiptIssuer(
            self.configuration, self.live, self.authority.clock, epoch_marks=self.authority.sequences
        )

    @property
    def configuration(self) -> TargetConfiguration:
        return TargetConfiguration(
            environment=SYNTHETIC_ENVIRONMENT, trust_tier="non_production", policy_digest=self.authority.policy_digest
        )

    @property
    def clock(self):
        return self.authority.clock

    def signed_grant(
        self,
        *,
        native: Sequence[str],
        ordinary: Sequence[str],
        execution_subjects: Sequence[ExecutionSubject] = (),
        **grant_overrides: object,
    ) -> tuple[bytes, GrantSignatures]:
        """Canonical bytes and threshold signatures of a synthetic grant for exactly this membership."""
        grant = self.authority.grant(
            native_membership=sorted(native),
            ordinary_membership=sorted(ordinary),
            execution_subjects=sorted(execution_subjects, key=ExecutionSubject.sort_key),
            max_workloads=max(1, len(native) + len(ordinary)),
            **grant_overrides,
        )
        return self.authority.signed(grant)

    def verify(
        self,
        *,
        native: Sequence[str],
        ordinary: Sequence[str],
        source_bytes: int,
        execution_subjects: Sequence[ExecutionSubject] = (),
        **grant_overrides: object,
    ) -> DevelopmentAuthorityReceipt:
        """Sign a synthetic grant for exactly this membership and verify it into an authority receipt."""
        grant_bytes, signatures = self.signed_grant(
            native=native, ordinary=ordinary, execution_subjects=execution_subjects, **grant_overrides
        )
        source = ReconstructedSource(
            repository=SYNTHETIC_REPOSITORY,
            commit=SYNTHETIC_COMMIT,
            native_membership=sorted(native),
            ordinary_membership=sorted(ordinary),
            source_bytes=source_bytes,
            peak_cpu_millicores=500,
            peak_memory_bytes=2**30,
        )
        return verify_grant(
            grant_bytes,
            signatures,
            pinned_policy_digest=self.authority.policy_digest,
            source=source,
            ports=self.authority.ports,
        )

    def projection(self, bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt) -> DeploymentProjection:
        return deployment_projection(bundle, authority)

    def publication(self, bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt) -> PublicationReceipt:
        return self.issuer.issue_publication(authority, self.projection(bundle, authority))

    def materialization(self, bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt) -> MaterializationReceipt:
        return self.issuer.issue_materialization(authority, self.projection(bundle, authority))

    def activation(
        self, bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt, purpose: ActivationPurpose = "activate"
    ) -> ActivationReceipt:
        return self.issuer.issue_activation(authority, self.projection(bundle, authority), purpose=purpose)


DEFAULT_MODELS = {"orders": "marts.orders", "customers": "marts.customers"}
DEFAULT_WORKLOADS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "transfer": (("raw.transfer",), ("prepare", "clear_today")),
    "export": (("exports.daily",), ()),
}


@dataclass(frozen=True)
class SyntheticRelease:
    bundle: ReleaseBundle
    authority: DevelopmentAuthorityReceipt
    source: MemorySource
    native: NativeCompilation | None
    ordinary: OrdinaryCapture | None


def synthetic_release(
    target: SyntheticTarget,
    *,
    project: str = "shop",
    models: Mapping[str, str] | None = DEFAULT_MODELS,
    workloads: Mapping[str, tuple[Sequence[str], Sequence[str]]] | None = DEFAULT_WORKLOADS,
    edit: Mapping[str, bytes] | None = None,
    **grant_overrides: object,
) -> SyntheticRelease:
    """Compose one synthetic development release (native + ordinary) under a freshly verified grant.

    `edit` replaces or adds source files before anything is captured (a changed source).
    """
    files: dict[str, bytes] = {}
    if models:
        files.update(synthetic_native_files(project, list(models)))
    for pack_id, (writes, hooks) in (workloads or {}).items():
        files.update(synthetic_workload_files(pack_id, writes, hooks))
    files.update(edit or {})
    source = MemorySource(files)
    native = synthetic_native(files, source.snapshot.digest, project, models) if models else None
    by_workload: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        if path.startswith("flows/"):
            by_workload.setdefault(path.split("/")[1], {})[path] = data
    captured = [synthetic_workload(p, w, h, files=by_workload[p]) for p, (w, h) in (workloads or {}).items()]
    ordinary = synthetic_capture(source.snapshot.digest, captured) if captured else None
    subjects = [ExecutionSubject(**s) for s in ordinary.execution_subjects()] if ordinary else []
    authority = target.verify(
        native=native.membership if native else [],
        ordinary=[w.pack_id for w in captured],
        source_bytes=source.snapshot.total_bytes,
        execution_subjects=subjects,
        **grant_overrides,
    )
    bundle = compose_release(authority=authority, source=source, native=native, ordinary=ordinary)
    return SyntheticRelease(bundle=bundle, authority=authority, source=source, native=native, ordinary=ordinary)
