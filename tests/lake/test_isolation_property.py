"""Isolation as a property: random fork lifecycles never touch the parent, and leave nothing behind.

Random sequences of create (the first fork from prod, each further one from the previous: chains
mixing throwaway and standing dev workspaces), materialize, read, drop, recreate-the-same-id and
writes by a second process (its own registration cache, so its registrations of an id may predate
a drop and re-create) run against a parent lake with real tables. After every sequence the parent's
snapshot list, catalog file list and stored files are byte-for-byte what they were, and once every
fork is dropped no ledger row, fork namespace (of any incarnation) or fork data file remains.
"""

from __future__ import annotations

import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
from dpone_dagster.control.store import open_store
from dpone_dagster.lake.resolution.fork import LakePorts, resolve_workspace_lake
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, split_storage_root
from dpone_dagster.lake.resolution.plan import parse_targets
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.registry import RegistrationCache
from dpone_dagster.workspaces.service import Workspaces

from .lakes import fingerprint, fork_places, materialize, run_sql

CHAIN = ["wm-fork-a", "dev/x", "wm-fork-a/b"]  # each forks the one before it (prod first)
TABLES = ["orders", "customers", "mart.fresh"]

steps = st.one_of(
    st.just(("fork",)),
    st.tuples(st.just("materialize"), st.integers(0, 2), st.sampled_from(TABLES)),
    st.tuples(st.just("read"), st.integers(0, 2)),
    st.just(("drop",)),
    st.just(("recreate",)),
    st.tuples(st.just("other_process"), st.integers(0, 2)),
)
operations = st.lists(steps, min_size=1, max_size=7).map(lambda ops: [("fork",), *ops])


def _other_process_write(env, ports: LakePorts, ws: str, counter: int) -> None:
    resolved = resolve_workspace_lake(ws, "main", env.config, parse_targets(["other"]), ports)
    conn = resolved.connect()
    try:
        conn.execute(f"CREATE OR REPLACE TABLE lake_main.main.other AS SELECT {counter} AS v")
    finally:
        conn.close()


def _run(env, service: Workspaces, ops, seen: dict[str, int]) -> None:
    """Interpret steps over a stack of live forks: CHAIN[0] <- CHAIN[1] <- CHAIN[2]."""
    live: list[str] = []
    other = LakePorts(registrations=RegistrationCache())
    for counter, step in enumerate(ops):
        if step[0] == "fork" and len(live) < len(CHAIN):
            parent = live[-1] if live else "prod"
            service.create_fork(CHAIN[len(live)], parent, owner="alice")
            seen["chained"] += parent != "prod"
            live.append(CHAIN[len(live)])
        elif step[0] == "materialize" and live:
            ws = live[min(step[1], len(live) - 1)]
            materialize(env, ws, step[2], f"SELECT {counter} AS v, range AS n FROM range(12)")
            seen["materialized"] += 1
        elif step[0] == "read" and live:
            ws = live[min(step[1], len(live) - 1)]
            assert run_sql(env, ws, [], fetch="SELECT count(*) FROM lake_main.customers")[0][0] >= 0
        elif step[0] == "other_process" and live:
            _other_process_write(env, other, live[min(step[1], len(live) - 1)], counter)
            seen["other_process"] += 1
        elif step[0] in ("drop", "recreate") and live:
            ws = live.pop()
            assert service.drop(ws, actor="alice").cleanup.complete
            seen["dropped"] += 1
            if step[0] == "recreate":
                service.create_fork(ws, live[-1] if live else "prod", owner="alice")
                live.append(ws)
                seen["recreated"] += 1


def _drop_everything(service: Workspaces) -> None:
    live = {w.id: w.parent_id for w in service.list() if not w.deleted and w.id != "prod"}
    for ws in sorted(live, key=CHAIN.index, reverse=True):
        assert service.drop(ws, actor="alice").cleanup.complete


def _check_property(env, ops_examples: int):
    service = Workspaces(env.config)
    service.grant_admin("prod", "alice", granted_by="alice")
    materialize(env, "prod", "orders", "SELECT range AS id FROM range(30)")
    materialize(env, "prod", "customers", "SELECT range AS id, true AS is_current FROM range(12)")
    parent = fingerprint(env)
    storage_root, _ = split_storage_root(resolve("prod", config=env.config).data_path)
    seen = {"recreated": 0, "chained": 0, "materialized": 0, "dropped": 0, "other_process": 0}

    @settings(
        max_examples=ops_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=operations)
    @example(ops=[("fork",), ("other_process", 0), ("recreate",), ("other_process", 0), ("drop",), ("fork",)])
    def prop(ops):
        try:
            _run(env, service, ops, seen)
            assert fingerprint(env) == parent
        finally:
            _drop_everything(service)
        with open_store(env.config.control_store).connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(ledger)).scalar() == 0
        assert [f for f in env.list_files(storage_root + "/") if f"/{FORK_DATA_DIR}/" in f] == []
        assert all(fork_places(env, ws) == ([], []) for ws in CHAIN)

    prop()
    assert fingerprint(env) == parent
    return seen


def test_fork_lifecycles_never_change_the_parent_embedded(embedded_lake):
    seen = _check_property(embedded_lake, ops_examples=10)
    assert min(seen.values()) > 0, seen


def test_fork_lifecycles_never_change_the_parent_postgres_s3(pg_s3_lake):
    seen = _check_property(pg_s3_lake, ops_examples=5)
    assert seen["materialized"] > 0 and seen["chained"] > 0, seen
