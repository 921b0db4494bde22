"""How a fork reaches its ancestors without touching its own namespace: the READ_ONLY attaches only.

`ancestor_reads` is the fork builder's ancestor half (`fork.py`: the same chain view, the same
physical places, roles and aliases, the same `ancestor_options`) for the code that reads ancestors
in a session of its own or alongside the fork's: pins and built-from snapshots (`pins.py`), the fork
diff (`lake/lifecycle/diff.py`) and promotion (`lake/lifecycle/promote.py`). One attach per
physical ancestor lake, pinned (the default) or at its current snapshot (`pinned=False`), and per
chain member the alias that serves it.

What a reader could get wrong: this registers nothing and attaches nothing; it returns the
statements. It also inspects no catalog, so unlike `resolve_workspace_lake` it includes an ancestor
whose namespace was never created: its attach fails in the caller's session (`pins.read_ancestors`
reports that as a problem). Outside fork mode it is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpone_dagster.config import DponeConfig
from dpone_dagster.lake.lifecycle.roles import confine
from dpone_dagster.lake.resolution.fork import ancestor_options, chain_lakes, physical_lake, secret_and_attach
from dpone_dagster.lake.resolution.naming import ancestor_alias
from dpone_dagster.lake.resolution.plan import AncestorAttach
from dpone_dagster.lake.state.tracking import workspace_lake_view


@dataclass(frozen=True)
class AncestorReads:
    """How a fork reaches its ancestors, without touching its own namespace: one READ_ONLY attach
    per physical ancestor lake (pinned or live) and, per chain member, the alias that serves it."""

    attaches: tuple[AncestorAttach, ...] = ()
    members: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def ancestor_reads(workspace_id: str, lake: str, config: DponeConfig, *, pinned: bool = True) -> AncestorReads:
    """The ancestor attaches of `workspace_id`'s lake (`pinned=False`: at their current snapshot).
    Registers nothing and attaches nothing; empty outside fork mode."""
    view = workspace_lake_view(workspace_id, lake, config, tables=())  # no tracking: attaches only
    if not view.forked[0]:
        return AncestorReads()
    own = view.settings[workspace_id].settings
    me = physical_lake(workspace_id, own, config, is_fork=True, incarnation=view.incarnation)
    ancestors, serving = chain_lakes(view, config)
    me, ancestors, warnings = confine(me, ancestors, config)
    aliases = {a.workspace_id: ancestor_alias(lake, a.workspace_id) for a in ancestors}
    attaches = tuple(
        AncestorAttach(
            a.workspace_id,
            aliases[a.workspace_id],
            secret_and_attach(
                a, aliases[a.workspace_id], ancestor_options(a, view.pins.get(a.workspace_id) if pinned else None)
            ),
        )
        for a in ancestors
    )
    members = {m: aliases[r.workspace_id] for m, r in serving.items() if r.workspace_id in aliases}
    return AncestorReads(attaches, members, tuple(warnings))
