"""Ordinary flow packs: strict reading of `flow.yaml` / `dag.yaml`, and the pure pack builder.

`build_pack(manifest, workload_dir, sql_sources, ceiling)` is the one function that turns a
manifest plus the exact SQL bytes into the canonical executable projection (`FlowPack`): one
`sql_pre_hook` task per hook in dependency order (ties by hook id) and one `flow_runtime` task after
all hooks, each with its generated command; public resources normalized to millicores and bytes
and checked against their limits and the policy ceiling; the alias-only connection projection; the
declared logical writes, verified against what the SQL actually writes; and the fingerprint.
Capture rebuilds every pack with it, and `python -m devtools.pack_fixtures build-fixtures`
writes the committed packs of `dbt_project_synthetic/flows/` with it, so the two cannot disagree.

Manifests are hostile input. Before model validation the raw YAML is scanned so that the refusals
the design names get their own codes: custom runners, command-like keys, post-hooks, and
credential material in a connection.

The one thing a reader could get wrong: the SQL is read by `release.build.flow_sql`, DuckDB's own
lexer and parser under an allowlist of statements and functions, never by a regex here; the writes
it reports must equal `writes`. Passing it admits SQL into a release, it never runs it: only the
synthetic runtime executes delivered SQL, inside its own sandboxed lake.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Protocol

import yaml

from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.flows import (
    PRE_HOOK_TASK_PREFIX,
    RUNTIME_TASK_ID,
    ConnectionParameter,
    ConnectionProjection,
    FlowDag,
    FlowError,
    FlowManifest,
    FlowPack,
    PackTask,
    PublicResources,
    ResourceQuantity,
    SqlFileRef,
    pack_fingerprint,
)
from dpone_dagster.release.build.flow_sql import flow_sql_writes

MAX_YAML_BYTES = 64 * 1024
MAX_YAML_EVENTS = 5_000
MAX_SQL_BYTES = 1024 * 1024
RUNTIME_PROGRAM = "dpone-flow"
MANIFEST_FILE = "flow.yaml"
DAG_FILE = "dag.yaml"
PACK_FILE = "pack.json"


class ResourceCeilingLike(Protocol):
    """Anything with the policy's per-workload resource ceiling (`DeliveryLimits`, `ResourceCeiling`)."""

    @property
    def max_cpu_millicores(self) -> int: ...

    @property
    def max_memory_bytes(self) -> int: ...


# ---------------------------------------------------------------------------------------------
# Strict YAML


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and non-string keys."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML hook
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(None, None, "mapping keys must be strings", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, "duplicate mapping key", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=True)


_PLAIN_TAGS = {
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


def strict_yaml(data: bytes, what: str) -> dict[str, Any]:
    """One YAML mapping of plain str/int/bool/null/list/map values, without anchors, aliases or tags."""
    if len(data) > MAX_YAML_BYTES:
        raise FlowError("flows.yaml_invalid", f"{what} is larger than {MAX_YAML_BYTES} bytes")
    if data.startswith(b"\xef\xbb\xbf"):
        raise FlowError("flows.yaml_invalid", f"{what} starts with a byte-order mark")
    try:
        text = data.decode("utf-8")
        events = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            events += 1
            if events > MAX_YAML_EVENTS or isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise FlowError("flows.yaml_invalid", f"{what} uses anchors/aliases or is too large")
            if getattr(event, "tag", None) not in (None, "!"):
                raise FlowError("flows.yaml_invalid", f"{what} uses an explicit YAML tag")
        loader = _StrictLoader(text)  # compose once, check the nodes, construct from those same nodes
        try:
            node = loader.get_single_node()
            _require_plain_nodes(node, what)
            value = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except FlowError:
        raise
    except (UnicodeDecodeError, yaml.YAMLError):
        raise FlowError("flows.yaml_invalid", f"{what} is not valid UTF-8 YAML with unique keys") from None
    if not isinstance(value, dict):
        raise FlowError("flows.yaml_invalid", f"{what} must be a YAML mapping")
    return value


def _require_plain_nodes(node: yaml.Node | None, what: str) -> None:
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if current.tag not in _PLAIN_TAGS:
            raise FlowError(
                "flows.yaml_invalid", f"{what} holds a value that is not a string, integer, boolean or null"
            )
        if isinstance(current, yaml.MappingNode):
            stack.extend(item for pair in current.value for item in pair)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


# ---------------------------------------------------------------------------------------------
# Raw (pre-model) refusals

_COMMAND_KEYS = {
    "command",
    "commands",
    "cmd",
    "args",
    "argv",
    "bash",
    "bash_command",
    "shell",
    "script",
    "entrypoint",
    "python",
    "python_callable",
    "callable",
    "operator",
    "image",
    "exec",
}
_POST_HOOK_KEYS = {"post_hook", "post_hooks", "posthook", "posthooks", "on_success", "on_failure", "finally"}
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth|session|cookie|dsn|uri|url|conn(ection)?[_-]?str",
    re.I,
)
_SECRET_VALUE = re.compile(
    r"://[^/\s@]*@|-----BEGIN|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{8,}\.|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-|"
    r"(password|pwd|token|secret)\s*[=:]",
    re.I,
)
_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9+/_-]{32,}={0,2}$")


def looks_like_credential(value: str) -> bool:
    """Known secret shapes, or a long mixed-case-and-digit token (an API key or password hash)."""
    if _SECRET_VALUE.search(value):
        return True
    return bool(_TOKEN_LIKE.fullmatch(value)) and all(
        any(test(ch) for ch in value) for test in (str.isdigit, str.isupper, str.islower)
    )


def _walk_keys(value: object, path: str = "") -> list[tuple[str, str, object]]:
    found: list[tuple[str, str, object]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((path, str(key), item))
            found.extend(_walk_keys(item, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_walk_keys(item, f"{path}[{index}]"))
    return found


def refuse_unsupported_shapes(raw: dict[str, Any], what: str) -> None:
    """Give command-like keys, runners, post-hooks and credential material their own codes."""
    for path, key, item in _walk_keys(raw):
        lowered = key.lower()
        if lowered in _COMMAND_KEYS:
            raise FlowError(
                "flows.arbitrary_command",
                f"{what} declares {key!r} at {path or '<top>'}; arbitrary commands are not supported",
            )
        if lowered in _POST_HOOK_KEYS or (lowered == "phase" and item != "pre"):
            raise FlowError(
                "flows.post_hook_unsupported", f"{what} declares a post-hook ({key!r}); only pre-hooks exist"
            )
        if (
            lowered in ("runner", "kind", "type", "process")
            and item != "flow_runtime"
            and not path.startswith("connections")
        ):
            raise FlowError("flows.custom_runner", f"{what} names a custom runner at {path or '<top>'}.{key}")
    for index, connection in enumerate(raw.get("connections") or []):
        for path, key, item in _walk_keys({"connection": connection}):
            if _SECRET_KEY.search(key) or (isinstance(item, str) and looks_like_credential(item)):
                raise FlowError(
                    "flows.connection_credential", f"{what} connection #{index} holds credential material at {key!r}"
                )


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_manifest(data: bytes, where: str) -> FlowManifest:
    raw = strict_yaml(data, where)
    refuse_unsupported_shapes(raw, where)
    try:
        manifest = FlowManifest.from_value(raw)
    except ContractError as error:
        raise FlowError("flows.manifest_invalid", f"{where}: {error.message}") from None
    aliases = [connection.alias for connection in manifest.connections]
    if len(aliases) != len(set(aliases)):
        raise FlowError("flows.duplicate_connection_alias", f"{where} declares a connection alias twice")
    if len(manifest.writes) != len(set(manifest.writes)):
        raise FlowError("flows.duplicate_logical_write", f"{where} lists a write twice")
    hook_ids = [hook.id for hook in manifest.pre_hooks]
    if len(hook_ids) != len(set(hook_ids)):
        raise FlowError("flows.duplicate_hook_id", f"{where} declares a hook id twice")
    return manifest


def parse_dag(data: bytes, where: str) -> FlowDag:
    raw = strict_yaml(data, where)
    refuse_unsupported_shapes(raw, where)
    try:
        return FlowDag.from_value(raw)
    except ContractError as error:
        raise FlowError("flows.dag_invalid", f"{where}: {error.message}") from None


_CPU = re.compile(r"^(?:(?P<milli>[1-9][0-9]*)m|(?P<whole>[0-9]+)(?:\.(?P<fraction>[0-9]{1,3}))?)$")
_MEMORY = re.compile(r"^(?P<number>[1-9][0-9]*)(?P<unit>Ki|Mi|Gi|Ti)?$")
_MEMORY_UNITS = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}


def cpu_millicores(quantity: str) -> int:
    """`250m` → 250, `0.5` → 500, `2` → 2000 (Kubernetes CPU quantities, millicore precision)."""
    match = _CPU.fullmatch(quantity)
    if match is None:
        raise FlowError("flows.manifest_invalid", f"cpu quantity {quantity!r} is not of the form 250m or 0.5")
    if match["milli"]:
        return int(match["milli"])
    return int(match["whole"]) * 1000 + int((match["fraction"] or "0").ljust(3, "0"))


def memory_bytes(quantity: str) -> int:
    """`256Mi` → 268435456; plain integers are bytes (Kubernetes binary memory quantities)."""
    match = _MEMORY.fullmatch(quantity)
    if match is None:
        raise FlowError("flows.manifest_invalid", f"memory quantity {quantity!r} is not of the form 256Mi")
    return int(match["number"]) * _MEMORY_UNITS[match["unit"]]


def public_resources(manifest: FlowManifest, ceiling: ResourceCeilingLike, where: str) -> PublicResources:
    """Normalize and admit the manifest's resources: request ≤ limit ≤ policy ceiling, per dimension."""
    requests, limits = manifest.resources.requests, manifest.resources.limits
    try:
        resources = PublicResources(
            requests=ResourceQuantity(
                cpu_millicores=cpu_millicores(requests.cpu), memory_bytes=memory_bytes(requests.memory)
            ),
            limits=ResourceQuantity(
                cpu_millicores=cpu_millicores(limits.cpu), memory_bytes=memory_bytes(limits.memory)
            ),
        )
    except ContractError as error:
        raise FlowError("flows.manifest_invalid", f"{where}: resources out of range ({error.message})") from None
    for dimension in ("cpu_millicores", "memory_bytes"):
        if getattr(resources.requests, dimension) > getattr(resources.limits, dimension):
            raise FlowError(
                "flows.resource_request_above_limit", f"{where}: {dimension} request is greater than its limit"
            )
    if (
        resources.limits.cpu_millicores > ceiling.max_cpu_millicores
        or resources.limits.memory_bytes > ceiling.max_memory_bytes
    ):
        raise FlowError("flows.resource_outside_policy", f"{where}: a resource limit is above the policy ceiling")
    return resources


# ---------------------------------------------------------------------------------------------
# SQL


def sql_text(data: bytes, where: str) -> str:
    if len(data) > MAX_SQL_BYTES:
        raise FlowError("flows.sql_invalid", f"{where} is larger than {MAX_SQL_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FlowError("flows.sql_invalid", f"{where} is not UTF-8") from None


# ---------------------------------------------------------------------------------------------
# Pack building


def hook_order(manifest: FlowManifest, where: str) -> tuple[str, ...]:
    """Hook ids in dependency order, ties broken by id. Refuses unbound dependencies and cycles."""
    declared = {hook.id: set(hook.after) for hook in manifest.pre_hooks}
    for hook_id, after in declared.items():
        unknown = sorted(after - declared.keys())
        if unknown:
            raise FlowError(
                "flows.unbound_dependency", f"{where}: hook {hook_id!r} depends on undeclared hook {unknown[0]!r}"
            )
    order: list[str] = []
    remaining = dict(declared)
    while remaining:
        ready = sorted(hook_id for hook_id, after in remaining.items() if after <= set(order))
        if not ready:
            raise FlowError(
                "flows.dependency_cycle", f"{where}: hooks {sorted(remaining)} depend on each other in a cycle"
            )
        order.extend(ready[:1])
        del remaining[ready[0]]
    return tuple(order)


def runtime_command(pack_id: str) -> tuple[str, ...]:
    return (RUNTIME_PROGRAM, "run", "--pack", pack_id)


def pre_hook_command(pack_id: str, hook_id: str) -> tuple[str, ...]:
    return (RUNTIME_PROGRAM, "pre-hook", "--pack", pack_id, "--hook", hook_id)


def build_pack(
    manifest: FlowManifest,
    *,
    workload_dir: str,
    sql_sources: Mapping[str, bytes],
    ceiling: ResourceCeilingLike,
    where: str | None = None,
) -> FlowPack:
    """The canonical executable projection of one workload, from its manifest and exact SQL bytes.

    `sql_sources` maps source-tree paths (`<workload_dir>/<manifest path>`) to bytes.
    """
    where = where or f"{workload_dir}/{MANIFEST_FILE}"
    refs: dict[str, SqlFileRef] = {}
    writes: set[str] = set()
    for relative in [*manifest.sql, *(hook.sql for hook in manifest.pre_hooks)]:
        path = f"{workload_dir}/{relative}"
        if path not in sql_sources:
            raise FlowError("flows.missing_source_file", f"{where} declares {relative!r}, which is not in the source")
        data = sql_sources[path]
        writes |= flow_sql_writes(sql_text(data, path), path)
        refs[relative] = SqlFileRef(path=path, content_sha256=hashlib.sha256(data).hexdigest())
    undeclared = sorted(writes - set(manifest.writes))
    if undeclared:
        raise FlowError(
            "flows.undeclared_write", f"{where}: the SQL writes {undeclared[0]!r}, which `writes` does not declare"
        )
    unused = sorted(set(manifest.writes) - writes)
    if unused:
        raise FlowError("flows.missing_write", f"{where}: `writes` declares {unused[0]!r}, which no SQL file writes")

    hooks = {hook.id: hook for hook in manifest.pre_hooks}
    tasks = [
        PackTask(
            task_id=PRE_HOOK_TASK_PREFIX + hook_id,
            kind="sql_pre_hook",
            hook_id=hook_id,
            sql=(refs[hooks[hook_id].sql],),
            upstream=tuple(sorted(PRE_HOOK_TASK_PREFIX + after for after in hooks[hook_id].after)),
            command=pre_hook_command(manifest.pack_id, hook_id),
            publish_xcom=False,
        )
        for hook_id in hook_order(manifest, where)
    ]
    tasks.append(
        PackTask(
            task_id=RUNTIME_TASK_ID,
            kind="flow_runtime",
            hook_id=None,
            sql=tuple(refs[relative] for relative in manifest.sql),
            upstream=tuple(sorted(task.task_id for task in tasks)),
            command=runtime_command(manifest.pack_id),
            publish_xcom=False,
        )
    )
    body = {
        "schema": "dpone.flow-pack.v1",
        "pack_id": manifest.pack_id,
        "selector": manifest.selector,
        "runner": "flow_runtime",
        "tasks": [task.model_dump(mode="json", by_alias=True) for task in tasks],
        "resources": public_resources(manifest, ceiling, where).model_dump(mode="json"),
        "connections": [projection.model_dump(mode="json") for projection in _projections(manifest)],
        "logical_writes": sorted(manifest.writes),
    }
    return FlowPack.from_value({**body, "fingerprint": pack_fingerprint(body)})


def _projections(manifest: FlowManifest) -> list[ConnectionProjection]:
    return [
        ConnectionProjection(
            alias=connection.alias,
            conn_type=connection.conn_type,
            access=connection.access,
            parameters=tuple(
                ConnectionParameter(name=name, value=value) for name, value in sorted(connection.parameters.items())
            ),
        )
        for connection in sorted(manifest.connections, key=lambda item: item.alias)
    ]
