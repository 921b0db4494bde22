"""The tables a dbt selection reads, from dbt's graph (manifest `depends_on`), for fork defer views.

A fork dbt run hands this read set to the dpone plugin (`DPONE_DBT_READS`, see `lake/resolution/reads.py`), so
the fork creates defer views only for the relations the selected models (and the tests that touch
them) read, not for every table its ancestors own. When the sources changed since the op's
manifest was parsed, the plugin computes it itself, inside dbt, from the manifest that dbt invocation
has just parsed (`lake/dbt_plugin.py: invocation_reads`); both sides use the functions here.

What a reader could get wrong:
- it is the *direct* parents that are read, not the whole upstream closure: a model's SQL selects
  only from its `ref`s and `source`s; a grandparent is read by the parent, which is already a table
  (or a view) somewhere. The one exception is an ephemeral parent: dbt inlines it as a CTE, so its
  own parents are read by the selected model, and the walk goes through it.
- tests count: every test that depends on a selected node may run (with `DBT_INDIRECT_SELECTION=
  eager` even one that also refers to an unselected model), so all of its parents are read too.
  Over-approximating costs a view; under-approximating would fail the run ("table does not exist").
- a relation dbt reads without declaring it (SQL naming a table directly, a macro calling
  `adapter.get_relation`) is not in the graph. Such a project opts out with `reads_everything=True`
  on the factory (then every table is deferred, as before read sets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

BUILT_TYPES = ("model", "seed", "snapshot")


def table_of(dbt_resource_props: Mapping[str, Any]) -> tuple[str, str]:
    """(schema, table) of the relation a dbt node builds."""
    return dbt_resource_props["schema"], dbt_resource_props.get("alias") or dbt_resource_props["name"]


def _name(node: Mapping[str, Any]) -> str:
    if node.get("resource_type") == "source":
        return f"{node['schema']}.{node.get('identifier') or node['name']}"
    return "{}.{}".format(*table_of(node))


def _is_ephemeral(node: Mapping[str, Any]) -> bool:
    return node.get("resource_type") == "model" and (node.get("config") or {}).get("materialized") == "ephemeral"


def _parents(node: Mapping[str, Any]) -> list[str]:
    return list((node.get("depends_on") or {}).get("nodes") or [])


def selected_nodes(manifest: Mapping[str, Any], targets: Iterable[str]) -> set[str]:
    """unique_ids of the models, seeds and snapshots that build one of `targets` (`schema.table`)."""
    wanted = set(targets)
    return {
        uid
        for uid, node in manifest.get("nodes", {}).items()
        if node.get("resource_type") in BUILT_TYPES and _name(node) in wanted
    }


def dbt_reads(manifest: Mapping[str, Any], targets: Iterable[str]) -> list[str]:
    """`schema.table` of every relation the dbt build of `targets` reads (targets themselves excluded)."""
    targets = set(targets)
    nodes = manifest.get("nodes", {})
    sources = manifest.get("sources", {})
    selected = selected_nodes(manifest, targets)
    stack = [parent for uid in selected for parent in _parents(nodes[uid])]
    for node in nodes.values():
        if node.get("resource_type") == "test" and selected.intersection(_parents(node)):
            stack.extend(_parents(node))
    reads: set[str] = set()
    seen: set[str] = set()
    while stack:
        uid = stack.pop()
        if uid in seen:
            continue
        seen.add(uid)
        node = nodes.get(uid) or sources.get(uid)
        if node is None:
            continue
        if _is_ephemeral(node):
            stack.extend(_parents(node))
        elif node.get("resource_type") in (*BUILT_TYPES, "source"):
            reads.add(_name(node))
    return sorted(reads - targets)
