"""Fork-mode resolution: write redirect, READ_ONLY ancestors, defer views, view→table transition.

A workspace resolves in fork mode when it has ancestors or its id starts with `wm-fork-` (orphaned
forks stay isolated), unless its lake is stamped shared. Then:

1. the target attach points at the fork's own namespace (PostgreSQL: `METADATA_SCHEMA` in the same
   catalog database; DuckDB file: a catalog file in a folder of its own beside the parent's, see
   `fork_catalog.py`) and data prefix, with every reserved option from settings stripped first;
2. each ancestor lake is attached READ_ONLY from that ancestor's *own* settings (its non-reserved
   args first, ours last so they win), never creating or migrating anything. An ancestor that is
   a fork is attached at its fork namespace; a root or shared ancestor at its configured one. Two
   ancestors at the same physical location are attached once (the nearer alias serves both);
3. one `CREATE VIEW IF NOT EXISTS` per table some ancestor owns and the fork does not, pointing at
   the nearest owner (SCD2 owners also get `<table>_current`), all in one transaction; a job that
   names its read set (`lake/resolution/reads.py`) gets only the views it reads, the rest come later on need;
4. targets that are live views in the fork are dropped right after the target attach.

Cost: the control store answers in five queries (chain, settings, own partitions, tracking, pins)
and each distinct catalog database in one connection, so resolution grows with chain depth, never
with the number of tables; with a read set the tracking query returns only the read tables' rows
(filtered in SQL), so the plan's rows grow with what the job reads, not with what the ancestors
own. A DuckDB-file fork catalog is not opened here at all: `apply()` reads its live views after
attaching it.

The builder reads each source once, in one pass (the chain view's fields, never its methods; the
catalogs; the ledger), and everything it derives from them is a value (`owners.py`, `plan.py`,
`attach.py`, `naming.py`): `tests/lake/test_lake_path.py` fails when the path re-enters a module.
The ancestor half alone (their attaches, without the fork's own namespace, for pins, diff and
promotion) is `ancestors.py`.

What a reader could get wrong: the transition keys on the fork catalog's live views read when the
plan is applied, not on recorded status (after a failed run the status cannot tell a defer view
from a real table).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from dpone_dagster.config import DponeConfig, LakeConfig
from dpone_dagster.confinement.status import check_fork_process
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.catalogs import CatalogAdapters, CatalogUnreachableError
from dpone_dagster.lake.guard.statement import Statement
from dpone_dagster.lake.lifecycle.roles import confine
from dpone_dagster.lake.ports import CatalogFacts, Clock, LiveViewTriples, Namespace, utc_now
from dpone_dagster.lake.resolution.apply import ResolvedLake, root_resolution
from dpone_dagster.lake.resolution.attach import (
    ANCESTOR_OWNED_OPTIONS,
    FORK_RESERVED_OPTIONS,
    Options,
    absolute_data_path,
    attach_statement,
    catalog_location,
    normalize_options,
    option_value,
    storage_secret_statement,
    strip_options,
)
from dpone_dagster.lake.resolution.fork_catalog import fork_catalog_location
from dpone_dagster.lake.resolution.naming import (
    ancestor_alias,
    fork_data_path,
    fork_metadata_schema,
    lake_alias,
    metadata_catalog,
)
from dpone_dagster.lake.resolution.owners import nearest_owners
from dpone_dagster.lake.resolution.partitions import PartitionView, partition_views
from dpone_dagster.lake.resolution.plan import (
    AncestorAttach,
    DeferPlan,
    DeferView,
    IncarnationFence,
    LiveViews,
    MissingMarks,
    ParentViews,
    TableName,
)
from dpone_dagster.lake.resolution.reads import ReadSet, keep_read, tracked_for
from dpone_dagster.lake.resolution.s3_access import s3_access_warning
from dpone_dagster.lake.state.registry import (
    CACHE,
    NamespaceRecord,
    RegistrationCache,
    register,
)
from dpone_dagster.lake.state.tracking import WorkspaceLakeView, workspace_lake_view

log = logging.getLogger(__name__)

CURRENT_SUFFIX = "_current"


class ForkCatalogUnsupportedError(LakeError):
    code = "lake.fork_unsupported_catalog"


@dataclass
class LakePorts:
    """What resolution talks to; tests swap a catalog adapter for a failing or counting one."""

    catalogs: CatalogAdapters = field(default_factory=CatalogAdapters)
    clock: Clock = utc_now
    registrations: RegistrationCache = CACHE


@dataclass(frozen=True)
class PhysicalLake:
    """Where one chain member's copy of the lake physically lives."""

    workspace_id: str
    settings: LakeConfig
    namespace: Namespace
    data_path: str
    is_fork: bool
    incarnation: str = ""

    @property
    def key(self) -> tuple[str, str | None, str]:
        return (self.namespace.database_key, self.namespace.schema, self.data_path)


def physical_lake(
    workspace_id: str, settings: LakeConfig, config: DponeConfig, *, is_fork: bool, incarnation: str = ""
) -> PhysicalLake:
    """Where `workspace_id`'s copy lives; a fork's place depends on its incarnation (see naming)."""
    base = catalog_location(settings, config.project_root)
    data_path = absolute_data_path(settings.data_path, config.project_root)
    if not is_fork:
        schema = option_value(normalize_options(settings.attach_args), "METADATA_SCHEMA")
        return PhysicalLake(workspace_id, settings, Namespace(base, schema and str(schema)), data_path, False)
    if base.kind not in ("postgres", "duckdb"):
        raise ForkCatalogUnsupportedError(
            f"lake {settings.name!r} has a {base.kind} catalog, which cannot hold a fork namespace; "
            "forks refuse to run rather than write the shared catalog (share the lake instead)"
        )
    schema = fork_metadata_schema(workspace_id, settings.name, incarnation)
    namespace = (
        Namespace(fork_catalog_location(base, schema), None) if base.kind == "duckdb" else Namespace(base, schema)
    )
    fork_path = fork_data_path(workspace_id, data_path, incarnation)
    return PhysicalLake(workspace_id, settings, namespace, fork_path, True, incarnation)


def _target_options(me: PhysicalLake) -> Options:
    options = strip_options(normalize_options(me.settings.attach_args), FORK_RESERVED_OPTIONS)
    options += (("DATA_PATH", me.data_path),)
    if me.namespace.schema is not None:
        options += (("METADATA_SCHEMA", me.namespace.schema),)
    return options


def ancestor_options(lake: PhysicalLake, snapshot: int | None = None) -> Options:
    """READ_ONLY at the ancestor's own place; `snapshot` (a pin, see `lake/resolution/pins.py`) attaches it at
    that DuckLake snapshot, so every view over it reads the pinned data with unchanged view SQL."""
    options = strip_options(normalize_options(lake.settings.attach_args), ANCESTOR_OWNED_OPTIONS)
    if snapshot is not None:
        options += (("SNAPSHOT_VERSION", int(snapshot)),)
    options += (
        ("DATA_PATH", lake.data_path),
        ("OVERRIDE_DATA_PATH", True),
        ("READ_ONLY", True),
        ("CREATE_IF_NOT_EXISTS", False),
    )
    if lake.namespace.schema is not None:
        options += (("METADATA_SCHEMA", lake.namespace.schema),)
    return options


def secret_and_attach(lake: PhysicalLake, alias: str, options: Options) -> tuple[Statement, ...]:
    """The storage secret (for `s3://` data paths) and the ATTACH of one physical lake."""
    access = "read" if option_value(options, "READ_ONLY") is True else "fork"
    s3_access_warning(lake.settings.storage, lake.data_path, access)
    secret = storage_secret_statement(lake.settings.storage, lake.data_path, access)
    return ((secret,) if secret else ()) + (attach_statement(lake.namespace.catalog, alias, options),)


def _inspect(
    ports: LakePorts, me: PhysicalLake, ancestors: Sequence[PhysicalLake]
) -> tuple[CatalogFacts, set[str], list[str]]:
    """One call per distinct catalog database. Returns (fork's facts, attachable ancestors, warnings)."""
    groups: dict[str, list[PhysicalLake]] = defaultdict(list)
    for lake in (me, *ancestors):
        groups[lake.namespace.database_key].append(lake)
    mine = CatalogFacts(frozenset())
    attachable: set[str] = set()
    warnings: list[str] = []
    for members in groups.values():
        adapter = ports.catalogs.for_kind(members[0].namespace.catalog.kind)
        views_of = me.namespace if me in members else None
        others = [m for m in members if m is not me]
        try:
            facts = adapter.inspect([m.namespace for m in others], views_of)
        except CatalogUnreachableError:
            if views_of is not None:
                raise
            for member in others:
                warnings.append(
                    f"the catalog of ancestor {member.workspace_id!r} cannot be reached; "
                    "its tables are not deferred in this run"
                )
            continue
        if views_of is not None:
            mine = facts
        for member in others:
            if member.namespace in facts.bootstrapped:
                attachable.add(member.workspace_id)
    return mine, attachable, warnings


def chain_lakes(view: WorkspaceLakeView, config: DponeConfig) -> tuple[list[PhysicalLake], dict[str, PhysicalLake]]:
    """Ancestors to attach (one per physical location, nearest first) and who serves each member."""
    ancestors: list[PhysicalLake] = []
    serving: dict[str, PhysicalLake] = {}
    by_key: dict[tuple, PhysicalLake] = {}
    for index, member in enumerate(view.chain[1:], start=1):
        settings = view.settings[member.id].settings
        try:
            there = physical_lake(
                member.id, settings, config, is_fork=view.forked[index], incarnation=member.incarnation
            )
        except ForkCatalogUnsupportedError:
            continue
        representative = by_key.setdefault(there.key, there)
        if representative is there:
            ancestors.append(there)
        serving[member.id] = representative
    return ancestors, serving


def _defer_views(
    view: WorkspaceLakeView, serving: dict[str, PhysicalLake], attachable: set[str], aliases: dict[str, str]
) -> tuple[list[DeferView], list[str], list[str]]:
    """A view per table owned up the chain (plus SCD2 companions); owners we cannot attach skipped,
    and tables recorded `missing` in their owner skipped with a warning each."""
    views: list[DeferView] = []
    skipped: set[str] = set()
    missing: list[str] = []
    chain_ids = view.chain_ids
    owned = nearest_owners(chain_ids, view.tracking)
    for name, (index, entry) in sorted(owned.items()):
        owner_id = chain_ids[index]
        owner = serving.get(owner_id)
        if owner is None or owner.workspace_id not in attachable:
            skipped.add(owner_id)
            continue
        if entry.missing:
            missing.append(
                f"table {name} of ancestor {owner_id!r} no longer exists there; it is not deferred "
                "(fork_state missing) until that ancestor materializes it again"
            )
            continue
        owner_alias = aliases[owner.workspace_id]
        views.append(DeferView(name, owner_id, owner_alias, name))
        companion = TableName(name.schema, name.table + CURRENT_SUFFIX)
        if entry.is_scd2 and companion not in owned:
            views.append(DeferView(companion, owner_id, owner_alias, name, current_only=True))
    return views, sorted(skipped), missing


def _partition_views(
    view: WorkspaceLakeView,
    serving: dict[str, PhysicalLake],
    attachable: set[str],
    aliases: dict[str, str],
    own_alias: str,
) -> list[PartitionView]:
    """A union view per table this fork built by partition, over the nearest owner (self excluded)."""
    if not view.partitions:
        return []
    chain_ids = view.chain_ids
    owners: dict[TableName, tuple[str, str | None]] = {}
    for name, (index, entry) in nearest_owners(["", *chain_ids[1:]], view.tracking).items():
        if name in view.partitions:
            owner = serving.get(chain_ids[index])
            ok = owner is not None and owner.workspace_id in attachable and not entry.missing
            owners[name] = (chain_ids[index], aliases[owner.workspace_id] if ok else None)  # type: ignore[union-attr]
    return partition_views(view.partitions, owners, own_alias)


def register_place(
    workspace_id: str, lake: str, own: LakeConfig, me: PhysicalLake, config: DponeConfig, ports: LakePorts
) -> None:
    """Record the fork's own place in the cleanup ledger (before anything is created there), then
    create the folder of its own DuckDB catalog file: the ledger covers the folder before it exists."""
    record = NamespaceRecord(
        workspace_id=workspace_id,
        ducklake_name=lake,
        metadata_schema=fork_metadata_schema(workspace_id, lake, me.incarnation),
        catalog=catalog_location(own, config.project_root),
        storage=own.storage,
        storage_ref=own.storage_ref,
        data_path=me.data_path,
    )
    register(
        open_store(config.control_store),
        record,
        incarnation=me.incarnation,
        clock=ports.clock,
        cache=ports.registrations,
        folder=me.namespace.catalog,
    )


def resolve_workspace_lake(
    workspace_id: str,
    lake: str,
    config: DponeConfig,
    targets: tuple[TableName, ...],
    ports: LakePorts | None = None,
    reads: ReadSet = None,
) -> ResolvedLake:
    """`reads` (see `lake/resolution/reads.py`): only those defer views are created; None = every table."""
    check_fork_process(config)  # a fork's process is confined by the kernel, or warns (dpone_dagster/confinement)
    view = workspace_lake_view(workspace_id, lake, config, tracked_for(reads, CURRENT_SUFFIX))
    own = view.settings[workspace_id].settings
    if not view.forked[0]:
        return root_resolution(workspace_id, own, config, targets)

    me = physical_lake(workspace_id, own, config, is_fork=True, incarnation=view.incarnation)
    ancestors, serving = chain_lakes(view, config)
    me, ancestors, role_warnings = confine(me, ancestors, config)
    aliases = {a.workspace_id: ancestor_alias(lake, a.workspace_id) for a in ancestors}
    ports = ports or LakePorts()
    facts, attachable, warnings = _inspect(ports, me, ancestors)
    adapter = ports.catalogs.for_kind(me.namespace.catalog.kind)  # the fork's own: plan inspection only
    warnings = role_warnings + warnings

    target_names = set(targets) | {TableName(t.schema, t.table + CURRENT_SUFFIX) for t in targets}
    views, skipped, missing = _defer_views(view, serving, attachable, aliases)
    views = keep_read(views, reads)  # defer only what the job reads (lake/resolution/reads.py)
    views += _partition_views(view, serving, attachable, aliases, lake_alias(lake))
    tracked = {name for ws in view.chain_ids for name in view.tracking.of(ws)}
    parent_views = ParentViews(frozenset(tracked | target_names), reads)  # untracked ones: parent_views.py
    defer = DeferPlan(tuple(v for v in views if v.name not in target_names), tuple(sorted(target_names)), parent_views)
    warnings += [
        f"ancestor {ws!r} owns tables of lake {lake!r} but its namespace is not reachable or was "
        "never created; those tables read as absent in this run"
        for ws in skipped
    ] + missing
    for warning in warnings:
        log.warning(warning)

    register_place(workspace_id, lake, own, me, config, ports)  # and the folder of its catalog file
    alias = lake_alias(lake)
    options = _target_options(me)
    *setup, target = secret_and_attach(me, alias, options)
    return ResolvedLake(
        alias=alias,
        workspace_id=workspace_id,
        lake=lake,
        fork_mode=True,
        namespace=fork_metadata_schema(workspace_id, lake, view.incarnation),
        data_path=me.data_path,
        catalog=me.namespace.catalog,
        base_catalog=catalog_location(own, config.project_root),
        setup=tuple(setup),
        target=target,
        ancestors=tuple(
            AncestorAttach(
                a.workspace_id,
                aliases[a.workspace_id],
                secret_and_attach(a, aliases[a.workspace_id], ancestor_options(a, view.pins.get(a.workspace_id))),
            )
            for a in ancestors
            if a.workspace_id in attachable
        ),
        defer=defer,
        warnings=tuple(warnings),
        targets=targets,
        live=None if facts.live_views is None else _by_name(facts.live_views),
        live_from=(adapter, me.namespace),
        metadata_catalog=metadata_catalog(alias, option_value(options, "METADATA_CATALOG")),
        missing_marks=MissingMarks(config, lake, frozenset(view.pins)),
        fence=IncarnationFence(config.control_store, workspace_id, view.incarnation),
    )


def _by_name(triples: LiveViewTriples) -> LiveViews:
    return {TableName(schema, name): sql for schema, name, sql in triples}
