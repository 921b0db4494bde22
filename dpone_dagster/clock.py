"""The clock port every service that reads the time depends on, and the wall-clock adapter.

Authority verification, receipt issuance, the release state machine and the release cache all take
a `Clock` so that tests and deterministic replays can pin the moment (`authority.memory.FixedClock`).
The one thing a reader could get wrong: `now()` must return a timezone-aware UTC datetime; callers
compare it against UTC contract timestamps and refuse a naive moment rather than guess its zone.
`dpone_dagster.lake` uses a plain callable clock instead (`lake.ports.Clock`); the two are not
interchangeable.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class SystemClock:
    """The wall clock. Only adapters and composition roots construct it."""

    def now(self) -> datetime:
        return datetime.now(UTC)
