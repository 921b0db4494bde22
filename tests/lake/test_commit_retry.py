"""DuckLake commit conflicts on a shared PostgreSQL catalog are retried, never surfaced.

Two processes (here: two separate DuckDB instances, each with its own catalog connection) that
commit to the same catalog race for the next snapshot id; the loser's INSERT into `ducklake_snapshot`
fails on its primary key and DuckLake retries the commit (after checking the other commit touched
nothing it touched) as often as `ducklake_max_retry_count` allows. Every attach this project makes
sets those settings (`lake/resolution/attach.py` COMMIT_RETRY). What a reader could get wrong: the race is
forced deterministically (A begins, B commits, A commits), so the retry is exercised on every run,
not by luck; and the same race with retries switched off shows that it really is a conflict.
"""

from __future__ import annotations

import duckdb
import pytest

from dpone_dagster.lake.resolution.attach import COMMIT_RETRY_SETTINGS
from dpone_dagster.lake.resolution.seam import resolve

pytestmark = [pytest.mark.postgres, pytest.mark.s3]


def _race(env, *, loser_retries: int | None = None) -> None:
    """A and B write different tables of prod from separate instances; B commits first, then A."""
    a = resolve("prod", "main", config=env.config).connect()
    b = resolve("prod", "main", config=env.config).connect()
    try:
        if loser_retries is not None:
            a.execute(f"SET GLOBAL ducklake_max_retry_count = {loser_retries}")
        a.execute("BEGIN")
        a.execute("INSERT INTO lake_main.main.t_a SELECT range FROM range(100)")
        b.execute("BEGIN")
        b.execute("INSERT INTO lake_main.main.t_b SELECT range FROM range(50)")
        b.execute("COMMIT")
        a.execute("COMMIT")
    finally:
        a.close()
        b.close()


def test_a_commit_that_loses_the_snapshot_race_is_retried_and_lands(pg_s3_lake):
    env = pg_s3_lake
    with resolve("prod", "main", config=env.config).connect() as conn:
        effective = dict(
            conn.execute("SELECT name, value FROM duckdb_settings() WHERE name LIKE 'ducklake_%retry%'").fetchall()
        )
        conn.execute("CREATE TABLE lake_main.main.t_a (i BIGINT)")
        conn.execute("CREATE TABLE lake_main.main.t_b (i BIGINT)")
        (before,) = conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()
    assert {k: str(v) for k, v in effective.items()} == {name: value for name, value in COMMIT_RETRY_SETTINGS} | {
        "ducklake_retry_backoff": effective["ducklake_retry_backoff"]
    }
    assert float(effective["ducklake_retry_backoff"]) == float(dict(COMMIT_RETRY_SETTINGS)["ducklake_retry_backoff"])

    _race(env)  # A's first commit attempt collides with B's snapshot id; the retry wins

    with resolve("prod", "main", config=env.config).connect() as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM lake_main.main.t_a), (SELECT count(*) FROM lake_main.main.t_b)"
        ).fetchone()
        snapshots = conn.execute(
            "SELECT snapshot_id FROM lake_main.snapshots() WHERE snapshot_id > ? ORDER BY 1", [before]
        ).fetchall()
    assert counts == (100, 50)
    assert [s for (s,) in snapshots] == [before + 1, before + 2]  # B then A, one snapshot each


def test_the_same_race_without_retries_surfaces_a_conflict(pg_s3_lake):
    """The control: the race above is a real conflict (so the test above cannot pass by accident)."""
    env = pg_s3_lake
    with resolve("prod", "main", config=env.config).connect() as conn:
        conn.execute("CREATE TABLE lake_main.main.t_a (i BIGINT)")
        conn.execute("CREATE TABLE lake_main.main.t_b (i BIGINT)")
    with pytest.raises(duckdb.Error, match="(?i)commit|conflict|primary key|unique"):
        _race(env, loser_retries=0)
    with resolve("prod", "main", config=env.config).connect() as conn:
        assert conn.execute("SELECT count(*) FROM lake_main.main.t_a").fetchone() == (0,)
