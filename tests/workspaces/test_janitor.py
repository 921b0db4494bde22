"""The TTL janitor: idle throwaway forks go through the normal drop; dev workspaces and used forks stay.

Forks are created "in the past" with an injected clock (their idle clock starts at creation), and
the janitor's clock is injected too; nothing sleeps. `lake_env` runs the tests that drop real
namespaces on the embedded default and on PostgreSQL + S3.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import workspace_usage
from dpone_dagster.lake.state.usage import forget_touches, touch_last_used
from dpone_dagster.workspaces.janitor import Janitor, JanitorNotRootError
from dpone_dagster.workspaces.service import Workspaces
from tests.lake.conftest import embedded_lake, lake_env  # noqa: F401 (the lake fixtures)
from tests.lake.lakes import fork_places, materialize, run_sql

NOW = datetime.now(UTC)
LONG_AGO = NOW - timedelta(days=10)


@pytest.fixture(autouse=True)
def _fresh_touch_memo(monkeypatch):
    # NOW is each test's own start, not the module's import: under pytest-xdist a test can run many
    # minutes after collection, and a fork created with the real clock would then be "newer" than
    # an injected NOW + 5 minutes.
    now = datetime.now(UTC)
    monkeypatch.setattr(sys.modules[__name__], "NOW", now)
    monkeypatch.setattr(sys.modules[__name__], "LONG_AGO", now - timedelta(days=10))
    forget_touches()
    yield
    forget_touches()


def _at(moment: datetime):
    return lambda: moment


def _last_used(config, workspace_id: str) -> str | None:
    with open_store(config.control_store).connect() as conn:
        row = conn.execute(
            sa.select(workspace_usage.c.last_used_at).where(workspace_usage.c.workspace_id == workspace_id)
        ).first()
    return row[0] if row else None


def _ids(workspaces: Workspaces) -> set[str]:
    return {w.id for w in workspaces.list() if not w.deleted}


def test_dry_run_equals_what_the_run_drops_and_dev_and_used_forks_survive(lake_env):
    config = lake_env.config
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(3)")
    old = Workspaces(config, clock=_at(LONG_AGO))
    old.create_fork("wm-fork-idle-a", "prod", owner="alice")
    old.create_fork("wm-fork-idle-b", "prod", owner="bob")
    old.create_fork("wm-fork-used", "prod", owner="carol")
    old.create_fork("wm-fork-long-ttl", "prod", owner="dan", ttl=timedelta(days=30))
    old.create_fork("alice-dev", "prod", owner="alice")  # a standing dev workspace, idle for ages
    materialize(lake_env, "wm-fork-idle-a", "own_rows", "SELECT 1 AS id")  # namespace + files to clean
    forget_touches()
    run_sql(lake_env, "wm-fork-used", [], fetch="SELECT count(*) FROM lake_main.main.orders")  # a use now
    # idle-a was used too — ten days ago, by the materialize above: move its clock back
    with open_store(config.control_store).begin() as conn:
        conn.execute(
            workspace_usage.update()
            .where(workspace_usage.c.workspace_id == "wm-fork-idle-a")
            .values(last_used_at=LONG_AGO.isoformat())
        )

    janitor = Janitor(Workspaces(config), clock=_at(NOW + timedelta(hours=1)))
    planned = janitor.plan()
    assert sorted(planned.to_drop) == ["wm-fork-idle-a", "wm-fork-idle-b"]
    assert "alice-dev" not in {v.workspace_id for v in planned.verdicts}, "dev workspaces are never candidates"
    kept = {v.workspace_id: v.reason for v in planned.verdicts if not v.drop}
    assert set(kept) == {"wm-fork-used", "wm-fork-long-ttl"}
    assert _ids(Workspaces(config)) >= {"wm-fork-idle-a", "wm-fork-idle-b"}, "the dry run dropped nothing"

    done = janitor.run()

    assert sorted(done.dropped) == sorted(planned.to_drop)
    assert not done.failed and not done.left_for_retry
    remaining = _ids(Workspaces(config))
    assert {"wm-fork-used", "wm-fork-long-ttl", "alice-dev", "prod"} <= remaining
    assert not remaining & {"wm-fork-idle-a", "wm-fork-idle-b"}
    assert fork_places(lake_env, "wm-fork-idle-a") == ([], []), "dropped through the normal cleanup"


def test_a_touched_forks_idle_clock_resets(lake_env):
    config = lake_env.config
    Workspaces(config, clock=_at(LONG_AGO)).create_fork("wm-fork-touched", "prod", owner="alice")
    Workspaces(config, clock=_at(LONG_AGO)).create_fork("wm-fork-untouched", "prod", owner="alice")
    assert _last_used(config, "wm-fork-touched") == LONG_AGO.isoformat()

    run_sql(lake_env, "wm-fork-touched", [], fetch="SELECT 1")  # a resolution: a run, `dpone lake sql`

    touched = datetime.fromisoformat(_last_used(config, "wm-fork-touched"))
    assert touched > NOW - timedelta(minutes=1)
    assert _last_used(config, "wm-fork-untouched") == LONG_AGO.isoformat()
    plan = Janitor(Workspaces(config), clock=_at(NOW + timedelta(hours=1))).plan()
    assert plan.to_drop == ["wm-fork-untouched"]


def test_touch_writes_at_most_once_a_minute(embedded_lake):
    config = embedded_lake.config
    Workspaces(config, clock=_at(LONG_AGO)).create_fork("wm-fork-busy", "prod", owner="alice")
    t0 = NOW
    assert touch_last_used("wm-fork-busy", config, clock=_at(t0)) is True
    assert touch_last_used("wm-fork-busy", config, clock=_at(t0 + timedelta(seconds=30))) is False
    forget_touches()  # another process: no memo, but the store row is younger than a minute
    assert touch_last_used("wm-fork-busy", config, clock=_at(t0 + timedelta(seconds=40))) is False
    assert _last_used(config, "wm-fork-busy") == t0.isoformat()
    assert touch_last_used("wm-fork-busy", config, clock=_at(t0 + timedelta(seconds=61))) is True
    assert _last_used(config, "wm-fork-busy") == (t0 + timedelta(seconds=61)).isoformat()
    assert touch_last_used("prod", config, clock=_at(t0)) is False


def test_fork_status_counts_as_use(embedded_lake):
    from dpone_dagster.cli.fork import app

    config = embedded_lake.config
    Workspaces(config, clock=_at(LONG_AGO)).create_fork("wm-fork-looked-at", "prod", owner="alice")
    result = CliRunner().invoke(app, ["status", "wm-fork-looked-at"])
    assert result.exit_code == 0, result.output
    assert datetime.fromisoformat(_last_used(config, "wm-fork-looked-at")) > NOW - timedelta(minutes=1)


def test_an_idle_fork_with_a_dev_workspace_below_is_kept_and_said_why(embedded_lake):
    config = embedded_lake.config
    old = Workspaces(config, clock=_at(LONG_AGO))
    old.create_fork("wm-fork-base", "prod", owner="alice")
    old.create_fork("bob-dev", "wm-fork-base", owner="bob")
    janitor = Janitor(Workspaces(config), clock=_at(NOW))
    plan = janitor.plan()
    (verdict,) = plan.verdicts
    assert not verdict.drop and "bob-dev" in verdict.reason
    assert janitor.run().dropped == []


def test_ttl_override_replaces_the_default_not_a_forks_own(embedded_lake):
    config = embedded_lake.config
    two_days_ago = Workspaces(config, clock=_at(NOW - timedelta(days=2)))
    two_days_ago.create_fork("wm-fork-default", "prod", owner="alice")
    two_days_ago.create_fork("wm-fork-own", "prod", owner="alice", ttl=timedelta(days=3))
    assert Janitor(Workspaces(config), clock=_at(NOW)).plan().to_drop == []  # default 7d
    plan = Janitor(Workspaces(config), clock=_at(NOW), ttl_override=timedelta(days=1)).plan()
    assert plan.to_drop == ["wm-fork-default"]
    own = next(v for v in plan.verdicts if v.workspace_id == "wm-fork-own")
    assert own.ttl_source == "fork" and own.ttl_seconds == 3 * 86400


def test_a_fork_used_between_the_plan_and_its_turn_is_kept(embedded_lake, monkeypatch):
    config = embedded_lake.config
    old = Workspaces(config, clock=_at(LONG_AGO))
    old.create_fork("wm-fork-first", "prod", owner="alice")
    old.create_fork("wm-fork-second", "prod", owner="alice")
    service = Workspaces(config)
    real_drop = service.drop

    def drop_then_someone_uses_second(workspace_id, *, actor):
        result = real_drop(workspace_id, actor=actor)
        touch_last_used("wm-fork-second", config)
        return result

    monkeypatch.setattr(service, "drop", drop_then_someone_uses_second)
    report = Janitor(service, clock=_at(NOW + timedelta(seconds=5))).run()
    assert report.dropped == ["wm-fork-first"]
    second = next(v for v in report.verdicts if v.workspace_id == "wm-fork-second")
    assert not second.drop and "kept at its turn" in second.reason
    assert "wm-fork-second" in _ids(Workspaces(config))


def test_the_janitor_drops_only_from_the_root_deployment(embedded_lake):
    config = embedded_lake.config.model_copy(update={"workspace": "alice-dev"})
    Workspaces(config, clock=_at(LONG_AGO)).create_fork("wm-fork-far", "prod", owner="alice")
    janitor = Janitor(Workspaces(config), clock=_at(NOW))
    assert janitor.run(dry_run=True).to_drop == ["wm-fork-far"]
    with pytest.raises(JanitorNotRootError) as refused:
        janitor.run()
    assert refused.value.code == "workspace.janitor_not_root"
    assert "wm-fork-far" in _ids(Workspaces(config))


def test_fork_janitor_cli_dry_run_json(embedded_lake):
    import json

    from dpone_dagster.cli.fork import app

    Workspaces(embedded_lake.config, clock=_at(LONG_AGO)).create_fork("wm-fork-cli", "prod", owner="alice")
    result = CliRunner().invoke(app, ["janitor", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["to_drop"] == ["wm-fork-cli"]
    assert "wm-fork-cli" in _ids(Workspaces(embedded_lake.config))
    bad = CliRunner().invoke(app, ["create", "wm-fork-x", "--parent", "prod", "--ttl", "soon"])
    assert bad.exit_code == 1 and "config.invalid_duration" in bad.output


def test_the_janitor_sensor_asks_for_a_run_only_when_a_fork_is_idle(embedded_lake):
    from dagster import RunRequest, SkipReason, build_sensor_context

    from dpone_dagster.integration.lake.maintenance import build_fork_janitor_job, build_fork_janitor_sensor

    sensor = build_fork_janitor_sensor(build_fork_janitor_job())
    Workspaces(embedded_lake.config).create_fork("wm-fork-fresh", "prod", owner="alice")
    assert isinstance(sensor(build_sensor_context()), SkipReason)
    Workspaces(embedded_lake.config, clock=_at(LONG_AGO)).create_fork("wm-fork-stale", "prod", owner="alice")
    request = sensor(build_sensor_context())
    assert isinstance(request, RunRequest) and request.tags["dpone/janitor"] == "wm-fork-stale"
    assert "wm-fork-stale" in _ids(Workspaces(embedded_lake.config)), "the sensor itself drops nothing"


def test_the_janitor_job_drops_the_idle_fork(embedded_lake):
    from dpone_dagster.integration.lake.maintenance import build_fork_janitor_job

    Workspaces(embedded_lake.config, clock=_at(LONG_AGO)).create_fork("wm-fork-stale", "prod", owner="alice")
    result = build_fork_janitor_job().execute_in_process()
    assert result.success
    assert "wm-fork-stale" not in _ids(Workspaces(embedded_lake.config))


def test_a_busy_fork_costs_the_store_nothing_within_the_minute(embedded_lake, monkeypatch):
    """The in-process memo: repeated resolutions within a minute do not even open a transaction."""
    import dpone_dagster.lake.state.usage as usage

    config = embedded_lake.config
    Workspaces(config).create_fork("wm-fork-hot", "prod", owner="alice")
    calls = []
    real_open = usage.open_store
    monkeypatch.setattr(usage, "open_store", lambda url: calls.append(url) or real_open(url))
    t0 = NOW + timedelta(minutes=5)
    assert touch_last_used("wm-fork-hot", config, clock=_at(t0)) is True
    for seconds in (1, 20, 59):
        touch_last_used("wm-fork-hot", config, clock=_at(t0 + timedelta(seconds=seconds)))
    assert len(calls) == 1
