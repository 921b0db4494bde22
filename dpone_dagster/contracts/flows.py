"""Ordinary flow documents: manifest, DAG, committed pack, and the capture handed to composition.

An ordinary workload lives in `flows/<pack_id>/` of the source repository and is declarative:

- `flow.yaml` → `FlowManifest`: selector, the SQL files the runtime runs (in order), separately
  scheduled SQL `pre_hooks` with ids and `after` dependencies, public resource requests/limits as
  Kubernetes quantities, connection aliases with binding shape only, and the tables it writes.
- `dag.yaml` → `FlowDag`: the orchestrator definition (the "DAG bytes"): dag id, schedule, selector.
- `pack.json` → `FlowPack`: the committed, canonical, executable projection of the flow and hook
  graph: one task per pre-hook plus one runtime task, each with its exact generated command, and a
  `fingerprint` over everything else in the pack.

`OrdinaryCapture` (built by `dpone_dagster.release.build.flows.capture_ordinary`) is what release
composition consumes. Per workload (`CapturedWorkload`, sorted by `pack_id`):

- `pack_id` (the ordinary workload id in grants), `selector`, `dag_id`, `schedule`;
- `fingerprint`: the committed pack's fingerprint, proven equal to a rebuild from source;
- `dag` / `manifest` / `pack`: path + content SHA-256 of the original bytes;
- `hook_order`: hook ids in dependency order; `hooks`: per hook its task id, SQL file + digest,
  `after`, exact command and `publish_xcom` (always false);
- `sql`: the runtime's SQL files in run order with digests; `runtime_command`;
- `logical_writes`: `schema.table` relations written (declared, and verified against the SQL);
- `resources`: requests/limits in millicores and bytes; `connections`: alias-only projection;
- `source_files`: the workload's complete source closure (path, content SHA-256, size), sorted.

The capture also carries `source_snapshot_digest` (of the whole source tree it was read from),
`selector_membership` (selector → dag id → pack id) and the `resource_ceiling` it was checked
against; `execution_subjects()` lists the runtime and pre-hook subjects in the grant's shape.

Connection projections are a closed shape: `parameters` may only name the binding-shape parameters
of `CONNECTION_PARAMETERS` (schema, database, catalog, role, region, bucket, prefix), each with a
value of its own bounded form. Any other name (`pw`, `login`, `key`, `pin`, `client_cert_b64`,
`pwd_file`, ...) is `flows.connection_parameter_not_allowed`, a value outside its form is
`flows.connection_parameter_invalid`, in an authored manifest and in a committed pack alike;
credentials are resolved at runtime, after admission, never written here.

The one thing a reader could get wrong: `content_sha256` fields are plain SHA-256 hex of raw file
bytes (no `sha256:` prefix, no domain); `fingerprint` and `source_snapshot_digest` are
domain-separated identities (`sha256:` + hex, see `contracts.identity`). They are never comparable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import (
    ContentSha256,
    Count,
    Digest,
    LogicalPath,
    Name,
    Text,
    bounded_text,
    sorted_unique,
)
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.identity import digest

FLOW_PACK_SCHEMA = "dpone.flow-pack.v1"
ORDINARY_CAPTURE_SCHEMA = "dpone.ordinary-capture.v1"
PACK_FINGERPRINT_KIND = "dpone.flow-pack-fingerprint.v1"

RUNTIME_TASK_ID = "runtime"
PRE_HOOK_TASK_PREFIX = "pre_hook."
MAX_SQL_FILES = 64
MAX_HOOKS = 32
MAX_CONNECTIONS = 16
MAX_WRITES = 64
MAX_COMMAND_ARGS = 32
MAX_CPU_MILLICORES = 1_000_000
MAX_MEMORY_BYTES = 2**50


PackId = bounded_text(r"^[a-z][a-z0-9_]{0,62}$", 63)
HookId = Name
FlowSelector = bounded_text(r"^flow:[a-z][a-z0-9_]{0,62}$", 68)
DagSelector = bounded_text(r"^[a-z][a-z0-9_]{0,15}:[A-Za-z0-9_.:+*/-]{1,200}$", 217)
Schedule = bounded_text(r"^(manual|[0-9*/,-]+( [0-9*/,-]+){4})$", 100)
RelationName = bounded_text(r"^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$", 127)
TaskId = bounded_text(r"^(runtime|pre_hook\.[a-z0-9][a-z0-9_.-]{0,62})$", 72)
CommandArg = bounded_text(r"^[A-Za-z0-9_.:/=@+-]{1,400}$", 400)
CpuQuantity = bounded_text(r"^([1-9][0-9]{0,5}m|[0-9]{1,4}(\.[0-9]{1,3})?)$", 10)
MemoryQuantity = bounded_text(r"^[1-9][0-9]{0,12}(Ki|Mi|Gi|Ti)?$", 15)
ParameterValue = bounded_text(r"^[A-Za-z0-9_.:/@+-]{0,200}$", 200)
ConnectionType = Literal["duckdb", "ducklake", "postgres", "s3"]
ConnectionAccess = Literal["read", "write", "read_write"]
ProcessKind = Literal["flow_runtime", "sql_pre_hook"]
Millicores = Annotated[StrictInt, Field(ge=1, le=MAX_CPU_MILLICORES)]
MemoryBytes = Annotated[StrictInt, Field(ge=1, le=MAX_MEMORY_BYTES)]


class FlowError(CodedError):
    """An ordinary workload was refused during capture or pack building (`release.flows`, `release.packs`)."""

    codes = {
        "flows.empty_membership": (
            "The source holds no ordinary workload (no flows/<name>/flow.yaml); empty membership is refused."
        ),
        "flows.yaml_invalid": (
            "A flow.yaml or dag.yaml is not a single plain YAML mapping (anchors, aliases, "
            "duplicate keys, tags or oversize are refused)."
        ),
        "flows.manifest_invalid": "A flow manifest does not match dpone.flow-manifest.v1; the message names the field.",
        "flows.dag_invalid": "A DAG file does not match dpone.flow-dag.v1; the message names the field.",
        "flows.pack_invalid": (
            "A committed pack is not canonical dpone.flow-pack.v1 JSON; rebuild it with build-fixtures."
        ),
        "flows.custom_runner": (
            "A workload or hook names a runner other than flow_runtime; custom runners are not supported."
        ),
        "flows.arbitrary_command": (
            "A manifest, DAG or pack carries a command the generator did not produce; "
            "arbitrary commands are not supported."
        ),
        "flows.post_hook_unsupported": (
            "A workload declares a separate post-hook; only separately scheduled pre-hooks exist."
        ),
        "flows.unsupported_process_kind": "A pack task is neither flow_runtime nor sql_pre_hook.",
        "flows.unbound_dependency": "A pre-hook depends on a hook id that no workload declares.",
        "flows.cross_constituent_dependency": (
            "A pre-hook depends on a hook of another workload; dependencies stay inside one workload."
        ),
        "flows.cross_constituent_reference": (
            "A DAG selects something that is not an ordinary flow (for example a dbt selector)."
        ),
        "flows.missing_workload": "A DAG selects a flow selector that no workload declares.",
        "flows.dependency_cycle": "The pre-hooks of a workload depend on each other in a cycle.",
        "flows.duplicate_selector": "Two workloads declare the same selector.",
        "flows.duplicate_pack_id": "Two workloads declare the same pack id.",
        "flows.duplicate_hook_id": "Two pre-hooks (in one or two workloads) share a hook id.",
        "flows.duplicate_dag_id": "Two DAG files declare the same dag id.",
        "flows.duplicate_logical_write": (
            "Two ordinary workloads write the same relation, or a manifest lists a write twice."
        ),
        "flows.duplicate_connection_alias": "A manifest declares the same connection alias twice.",
        "flows.duplicate_membership": "A workload is selected by more than one DAG.",
        "flows.unscheduled_workload": "A workload is selected by no DAG; nothing is scheduled implicitly.",
        "flows.missing_source_file": (
            "A workload file (flow.yaml, dag.yaml, pack.json, or a declared SQL file) is missing from the source."
        ),
        "flows.undeclared_file": "A workload directory holds a file its manifest does not declare.",
        "flows.connection_credential": (
            "A connection projection holds credential material; connections carry aliases and binding shape only."
        ),
        "flows.connection_parameter_not_allowed": (
            "A connection names a parameter outside the binding-shape "
            "allowlist (schema, database, catalog, role, region, bucket, "
            "prefix); anything else, credentials above all, is resolved at "
            "runtime and never delivered."
        ),
        "flows.connection_parameter_invalid": (
            "A connection parameter's value is outside its bounded form (an SQL "
            "name for schema, database, catalog and role; a bucket name, region or "
            "object prefix for the others)."
        ),
        "flows.resource_request_above_limit": "A resource request is greater than its limit.",
        "flows.resource_outside_policy": "A resource limit is above the policy ceiling.",
        "flows.sql_invalid": "A SQL file is not UTF-8 text or is larger than 1 MiB.",
        "flows.sql_statement_not_allowed": (
            "A SQL file uses a statement that reaches outside the database (ATTACH, "
            "COPY, INSTALL, LOAD, PRAGMA, SET, secrets, ...)."
        ),
        "flows.undeclared_write": "The SQL writes a relation the manifest does not declare in `writes`.",
        "flows.missing_write": "The manifest declares a write that no SQL file performs.",
        "flows.pack_drift": (
            "The committed pack differs from the pack rebuilt from source; the message names the first differing field."
        ),
        "flows.pack_fingerprint_mismatch": (
            "The committed pack's fingerprint does not match its content or the rebuilt pack."
        ),
        "flows.pre_hook_publishes_xcom": (
            "A pre-hook task sets publish_xcom; pre-hook tasks must keep publish_xcom=false."
        ),
    }


_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
CONNECTION_PARAMETERS: Mapping[str, re.Pattern[str]] = {
    "schema": _SQL_NAME,
    "database": _SQL_NAME,
    "catalog": _SQL_NAME,
    "role": _SQL_NAME,
    "region": re.compile(r"[a-z]{2}(-[a-z]+){1,2}-[0-9]{1,2}"),
    "bucket": re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"),
    "prefix": re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}){0,7}/?"),
}
"""The closed set of connection parameters (binding shape only) and the form each value must have."""


def require_binding_shape(parameters: Mapping[str, str]) -> None:
    """Refuse any parameter outside `CONNECTION_PARAMETERS` or a value outside its form (values are never echoed)."""
    for name, value in parameters.items():
        form = CONNECTION_PARAMETERS.get(name)
        if form is None:
            raise FlowError(
                "flows.connection_parameter_not_allowed",
                f"connection parameter {name!r} is not a binding-shape parameter",
            )
        if not isinstance(value, str) or not form.fullmatch(value):
            raise FlowError(
                "flows.connection_parameter_invalid",
                f"the value of connection parameter {name!r} is outside its bounded form",
            )


# ---------------------------------------------------------------------------------------------
# Manifest and DAG (authored YAML, validated after the strict YAML reader turns it into values)


class ManifestQuantity(ContractModel):
    """A request or limit as authored: Kubernetes quantities (`250m`, `0.5`; `256Mi`, `1Gi`)."""

    cpu: CpuQuantity
    memory: MemoryQuantity


class ManifestResources(ContractModel):
    requests: ManifestQuantity
    limits: ManifestQuantity


class HookDeclaration(ContractModel):
    """One separately scheduled SQL pre-hook: runs `sql` after every hook in `after`."""

    id: HookId
    sql: LogicalPath
    after: tuple[HookId, ...] = Field(default=(), max_length=MAX_HOOKS)


class ConnectionDeclaration(ContractModel):
    """A connection alias and its binding shape. Values bound at runtime never appear here."""

    alias: PackId
    conn_type: ConnectionType
    access: ConnectionAccess
    parameters: dict[Name, ParameterValue] = Field(default_factory=dict, max_length=16)

    @field_validator("parameters")
    @classmethod
    def _binding_shape_only(cls, parameters: dict[str, str]) -> dict[str, str]:
        require_binding_shape(parameters)
        return parameters


class FlowManifest(ContractModel):
    """`flow.yaml`: one ordinary workload. SQL and hook paths are relative to the workload directory."""

    schema_: Literal["dpone.flow-manifest.v1"] = Field(alias="schema")
    pack_id: PackId
    selector: FlowSelector
    runner: Literal["flow_runtime"]
    description: Text = ""
    sql: tuple[LogicalPath, ...] = Field(min_length=1, max_length=MAX_SQL_FILES)
    pre_hooks: tuple[HookDeclaration, ...] = Field(default=(), max_length=MAX_HOOKS)
    resources: ManifestResources
    connections: tuple[ConnectionDeclaration, ...] = Field(default=(), max_length=MAX_CONNECTIONS)
    writes: tuple[RelationName, ...] = Field(min_length=1, max_length=MAX_WRITES)


class FlowDag(ContractModel):
    """`dag.yaml`: the orchestrator definition. `selector` names the workload(s) the DAG runs."""

    schema_: Literal["dpone.flow-dag.v1"] = Field(alias="schema")
    dag_id: PackId
    schedule: Schedule
    selector: DagSelector
    tags: tuple[Name, ...] = Field(default=(), max_length=16)


# ---------------------------------------------------------------------------------------------
# Pack (canonical JSON, committed next to the sources and rebuilt during capture)


class ResourceQuantity(ContractModel):
    cpu_millicores: Millicores
    memory_bytes: MemoryBytes


class PublicResources(ContractModel):
    """Public resource requests and limits, normalized to integers (exact, no unit ambiguity)."""

    requests: ResourceQuantity
    limits: ResourceQuantity


class ResourceCeiling(ContractModel):
    """Policy upper bound for any one workload's resources (field names match `DeliveryLimits`)."""

    max_cpu_millicores: Millicores
    max_memory_bytes: MemoryBytes


class ConnectionParameter(ContractModel):
    name: Name
    value: ParameterValue

    @model_validator(mode="after")
    def _binding_shape_only(self) -> ConnectionParameter:
        require_binding_shape({self.name: self.value})
        return self


class ConnectionProjection(ContractModel):
    """The alias-only projection of a connection: no host credentials, no secret, no DSN."""

    alias: PackId
    conn_type: ConnectionType
    access: ConnectionAccess
    parameters: sorted_unique(ConnectionParameter, max_length=16, key=lambda item: item.name)


class SqlFileRef(ContractModel):
    """A SQL file by its path in the source tree and the SHA-256 of its bytes."""

    path: LogicalPath
    content_sha256: ContentSha256


class PackTask(ContractModel):
    """One executable task: a flow runtime or a SQL pre-hook, with its exact generated command."""

    task_id: TaskId
    kind: ProcessKind
    hook_id: HookId | None
    sql: tuple[SqlFileRef, ...] = Field(min_length=1, max_length=MAX_SQL_FILES)
    upstream: sorted_unique(TaskId, max_length=MAX_HOOKS)
    command: tuple[CommandArg, ...] = Field(min_length=1, max_length=MAX_COMMAND_ARGS)
    publish_xcom: StrictBool


class FlowPack(ContractModel):
    """The committed executable projection of one workload. `fingerprint` covers every other field."""

    KIND = FLOW_PACK_SCHEMA

    schema_: Literal["dpone.flow-pack.v1"] = Field(default=FLOW_PACK_SCHEMA, alias="schema")
    pack_id: PackId
    selector: FlowSelector
    runner: Literal["flow_runtime"]
    tasks: tuple[PackTask, ...] = Field(min_length=1, max_length=MAX_HOOKS + 1)
    resources: PublicResources
    connections: sorted_unique(ConnectionProjection, max_length=MAX_CONNECTIONS, key=lambda item: item.alias)
    logical_writes: sorted_unique(RelationName, min_length=1, max_length=MAX_WRITES)
    fingerprint: Digest

    def expected_fingerprint(self) -> str:
        """The fingerprint this pack's other fields determine (persisted: must never change)."""
        return pack_fingerprint(self.model_dump(mode="json", by_alias=True, exclude={"fingerprint"}))


def pack_fingerprint(pack_body: dict[str, Any]) -> str:
    """Domain-separated digest of a pack's canonical body without its `fingerprint` member."""
    if "fingerprint" in pack_body:
        raise ValueError("the fingerprint is computed over the pack body without the fingerprint")
    return digest(PACK_FINGERPRINT_KIND, pack_body)


# ---------------------------------------------------------------------------------------------
# Capture (the output of ordinary capture; engineer-facing contract for composition)


class CapturedFile(ContractModel):
    path: LogicalPath
    content_sha256: ContentSha256
    size: Count


class CapturedHook(ContractModel):
    hook_id: HookId
    task_id: TaskId
    sql: SqlFileRef
    after: sorted_unique(HookId, max_length=MAX_HOOKS)
    command: tuple[CommandArg, ...] = Field(min_length=1, max_length=MAX_COMMAND_ARGS)
    publish_xcom: Literal[False]


class CapturedWorkload(ContractModel):
    pack_id: PackId
    selector: FlowSelector
    dag_id: PackId
    schedule: Schedule
    fingerprint: Digest
    dag: CapturedFile
    manifest: CapturedFile
    pack: CapturedFile
    hook_order: tuple[HookId, ...] = Field(max_length=MAX_HOOKS)
    hooks: tuple[CapturedHook, ...] = Field(max_length=MAX_HOOKS)
    sql: tuple[SqlFileRef, ...] = Field(min_length=1, max_length=MAX_SQL_FILES)
    runtime_command: tuple[CommandArg, ...] = Field(min_length=1, max_length=MAX_COMMAND_ARGS)
    logical_writes: sorted_unique(RelationName, min_length=1, max_length=MAX_WRITES)
    resources: PublicResources
    connections: sorted_unique(ConnectionProjection, max_length=MAX_CONNECTIONS, key=lambda item: item.alias)
    source_files: sorted_unique(CapturedFile, min_length=1, max_length=4 * MAX_SQL_FILES, key=lambda item: item.path)

    @model_validator(mode="after")
    def _hooks_follow_order(self) -> CapturedWorkload:
        if tuple(hook.hook_id for hook in self.hooks) != self.hook_order:
            raise ValueError("hooks must be listed in hook_order")
        return self


class SelectorMember(ContractModel):
    selector: FlowSelector
    dag_id: PackId
    pack_id: PackId


class OrdinaryCapture(ContractModel):
    """Every ordinary workload of one source snapshot, verified against its committed pack."""

    KIND = ORDINARY_CAPTURE_SCHEMA

    schema_: Literal["dpone.ordinary-capture.v1"] = Field(default=ORDINARY_CAPTURE_SCHEMA, alias="schema")
    source_snapshot_digest: Digest
    flows_root: LogicalPath
    resource_ceiling: ResourceCeiling
    workloads: sorted_unique(CapturedWorkload, min_length=1, max_length=10_000, key=lambda item: item.pack_id)
    selector_membership: sorted_unique(SelectorMember, min_length=1, max_length=10_000, key=lambda item: item.selector)

    @model_validator(mode="after")
    def _membership_matches_workloads(self) -> OrdinaryCapture:
        by_workload = sorted((w.selector, w.dag_id, w.pack_id) for w in self.workloads)
        by_membership = [(m.selector, m.dag_id, m.pack_id) for m in self.selector_membership]
        if by_workload != by_membership:
            raise ValueError("selector_membership must list exactly one entry per workload")
        return self

    @property
    def pack_ids(self) -> tuple[str, ...]:
        return tuple(workload.pack_id for workload in self.workloads)

    @property
    def logical_writes(self) -> dict[str, str]:
        """Every relation an ordinary workload writes → the pack id writing it."""
        return {relation: w.pack_id for w in self.workloads for relation in w.logical_writes}

    def execution_subjects(self) -> tuple[dict[str, str | None], ...]:
        """`{"workload", "kind", "hook_id"}` per runtime and pre-hook, sorted as grants sort them."""
        subjects = []
        for workload in self.workloads:
            subjects.append({"workload": workload.pack_id, "kind": "runtime", "hook_id": None})
            subjects.extend(
                {"workload": workload.pack_id, "kind": "pre_hook", "hook_id": h} for h in workload.hook_order
            )
        return tuple(sorted(subjects, key=lambda s: (s["workload"], s["kind"], s["hook_id"] or "")))
