"""Partition runs without a full re-parse: the window reaches dbt as environment variables, not `--vars`.

dbt keys its partial parse on `--vars`, so a window passed that way made every partition run parse the
whole project again. Each run's own dbt debug log (dagster-dbt writes it into the run's target folder)
says which parse dbt did: after two consecutive prod partition runs and one fork partition run (whose
hidden-table suffix is read while parsing: the partitioned model alone is parsed again), no log may
say "Unable to do partial parsing" or "Starting full parse".
"""

from __future__ import annotations

import pytest
from dagster import AssetKey
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup

pytestmark = pytest.mark.slow

FORK = "wm-fork-partition-parse"
DAILY = AssetKey(["main", "marts", "daily_order_totals"])
FULL_PARSE = ("Unable to do partial parsing", "Starting full parse")


def _partition_run(setup: LakeSetup, day: str):
    from dagster import materialize

    from dpone_dagster.definitions import defs
    from dpone_dagster.defs.dbt.partitioned import synthetic_dbt_daily_assets

    with setup.applied():
        result = materialize(
            [synthetic_dbt_daily_assets],
            resources=dict(defs.resources or {}),
            selection=[DAILY],
            partition_key=day,
            raise_on_error=False,
        )
    assert result.success
    return result


def _dbt_log(result) -> str:
    (folder,) = (DBT_PROJECT_DIR / "target").glob(f"synthetic_dbt_daily-{result.run_id[:7]}-*")
    return (folder / "dbt.log").read_text(encoding="utf-8")


def _parse_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "partial pars" in line.lower() or "full parse" in line.lower()]


def test_consecutive_partition_runs_do_no_full_parse(built_prod_lake):
    from dpone_dagster.config import load_config
    from dpone_dagster.workspaces.service import Workspaces

    root, built = built_prod_lake
    assert built.success
    logs = [_dbt_log(_partition_run(root, day)) for day in ("2024-01-10", "2024-01-11")]
    with root.applied():
        Workspaces(load_config()).create_fork(FORK, "prod", owner="tester")
    logs.append(_dbt_log(_partition_run(LakeSetup(root.state_dir, extra_env={"DPONE_WORKSPACE": FORK}), "2024-01-11")))

    for log in logs:
        assert "Partial parsing enabled" in log, _parse_lines(log)
        assert not any(marker in log for marker in FULL_PARSE), _parse_lines(log)
    assert "0 files changed" in logs[1], _parse_lines(logs[1])  # a new window: nothing parsed again
    assert "1 files changed" in logs[2], _parse_lines(logs[2])  # the fork's suffix: the one model
    assert root.rows("SELECT count(*) FROM lake_main.marts.daily_order_totals")[0][0] == 2  # two windows, one row each
