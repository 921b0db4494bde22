"""The one clock port: the wall clock is aware UTC, and authority and release share the protocol."""

from __future__ import annotations

from datetime import UTC, datetime

from dpone_dagster.authority import ports as authority_ports
from dpone_dagster.authority.memory import FixedClock
from dpone_dagster.clock import Clock, SystemClock
from dpone_dagster.release import pipeline
from dpone_dagster.release.delivery import cache_reading


def test_the_system_clock_answers_aware_utc() -> None:
    moment = SystemClock().now()
    assert moment.tzinfo is not None
    assert moment.utcoffset() == UTC.utcoffset(moment)


def test_authority_and_release_depend_on_the_same_clock_protocol() -> None:
    assert authority_ports.Clock is Clock is cache_reading.Clock is pipeline.Clock
    assert isinstance(SystemClock(), Clock)
    assert isinstance(FixedClock(datetime(2030, 1, 1, tzinfo=UTC)), Clock)
    assert not isinstance(object(), Clock)
