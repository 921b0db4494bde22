"""Accepted-sequence stores: compare-and-set semantics, durability across restarts, concurrency."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from dpone_dagster.authority.memory import InMemoryAcceptedSequenceStore
from dpone_dagster.authority.ports import AcceptedSequence
from dpone_dagster.authority.sql_sequences import SqlAcceptedSequenceStore
from dpone_dagster.contracts.identity import digest
from dpone_dagster.control.store import open_store, reset_store_cache

POLICY = digest("dpone.development-policy.v1", {"p": 1})


def _grant(n: int) -> AcceptedSequence:
    return AcceptedSequence(n, digest("dpone.development-authority.v1", {"n": n}))


def _sqlite(tmp_path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{tmp_path / 'control.sqlite'}")


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    if request.param == "memory":
        return InMemoryAcceptedSequenceStore()
    return SqlAcceptedSequenceStore(_sqlite(tmp_path))


def test_compare_and_set(store) -> None:
    assert store.highest(POLICY, "env-a") is None
    assert store.accept(POLICY, "env-a", _grant(2))
    assert store.accept(POLICY, "env-a", _grant(2)), "identical re-acceptance is idempotent"
    assert not store.accept(POLICY, "env-a", _grant(1)), "lower sequence refused"
    assert not store.accept(POLICY, "env-a", AcceptedSequence(2, _grant(9).grant_digest)), "same sequence, other grant"
    assert store.accept(POLICY, "env-a", _grant(3))
    assert store.highest(POLICY, "env-a") == _grant(3)
    assert store.highest(POLICY, "env-b") is None
    assert store.accept(POLICY, "env-b", _grant(1))


def test_sql_store_survives_a_restart(tmp_path) -> None:
    SqlAcceptedSequenceStore(_sqlite(tmp_path)).accept(POLICY, "env-a", _grant(7))
    reopened = SqlAcceptedSequenceStore(_sqlite(tmp_path))
    assert reopened.highest(POLICY, "env-a") == _grant(7)
    assert not reopened.accept(POLICY, "env-a", _grant(6))


def test_concurrent_accepts_keep_the_highest(store) -> None:
    barrier = threading.Barrier(8)
    results: dict[int, bool] = {}

    def worker(n: int) -> None:
        barrier.wait()
        results[n] = store.accept(POLICY, "env-c", _grant(n))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.highest(POLICY, "env-c") == _grant(8)
    assert results[8] is True


@pytest.mark.postgres
def test_sql_store_on_postgresql(postgres_server, pg_database) -> None:
    engine = sa.create_engine(postgres_server.url(pg_database))
    try:
        store = SqlAcceptedSequenceStore(engine)
        assert store.accept(POLICY, "env-a", _grant(4))
        assert not store.accept(POLICY, "env-a", _grant(3))
        assert SqlAcceptedSequenceStore(engine).highest(POLICY, "env-a") == _grant(4)
    finally:
        engine.dispose()


def test_the_control_store_creates_the_sequence_table_with_the_other_domains(tmp_path) -> None:
    reset_store_cache()
    tables = set(sa.inspect(open_store(f"sqlite:///{tmp_path / 'store.sqlite'}")).get_table_names())
    assert {"accepted_grant_sequences", "release_states", "workspace"} <= tables
    reset_store_cache()
