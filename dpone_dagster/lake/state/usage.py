"""`touch_last_used`: record that a fork was used, cheaply, for the TTL janitor's idle clock.

Called by every resolution of a fork (so by every run and every `dpone lake sql` in it) and by
`dpone fork status`. A fork counts as idle only while nothing touches it.

What a reader could get wrong: the touch is deliberately lossy. A process writes a workspace's
`last_used_at` at most once per `TOUCH_INTERVAL_SECONDS` (an in-process memo keyed by store and
workspace), and the store-side UPDATE only moves a row older than that, so a busy fork costs one
write a minute, not one per resolution. The idle clock is therefore accurate to about a minute,
which is nothing next to a TTL of hours or days. A failing touch is logged and swallowed: losing
one touch can only make a fork look idle up to a minute early, never break the resolution.
The root workspace is never touched (it is never reaped).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import TOUCH_INTERVAL_SECONDS, touch_usage
from dpone_dagster.lake.ports import Clock, utc_now

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_TOUCHED: dict[tuple[str, str], datetime] = {}


def forget_touches() -> None:
    """Clear the in-process memo (tests that move an injected clock backwards)."""
    with _LOCK:
        _TOUCHED.clear()


def touch_last_used(workspace_id: str, config: DponeConfig, *, clock: Clock = utc_now) -> bool:
    """Mark `workspace_id` as used now; True when the store was written."""
    if workspace_id == ROOT_WORKSPACE:
        return False
    now = clock()
    interval = timedelta(seconds=TOUCH_INTERVAL_SECONDS)
    key = (config.control_store, workspace_id)
    with _LOCK:
        last = _TOUCHED.get(key)
        if last is not None and timedelta(0) <= now - last < interval:
            return False
        _TOUCHED[key] = now
    try:
        with open_store(config.control_store).begin() as conn:
            stored = touch_usage(conn, workspace_id, now.isoformat(), (now - interval).isoformat())
    except sa.exc.IntegrityError:
        return False  # another process inserted the first row at the same moment
    except Exception as exc:  # the touch must never break what the fork is doing
        log.warning("could not record that workspace %s was used (%s)", workspace_id, type(exc).__name__)
        with _LOCK:
            _TOUCHED.pop(key, None)
        return False
    with _LOCK:  # remember when the store's row was written, not when we last asked
        if stored is None:
            _TOUCHED.pop(key, None)
        else:
            _TOUCHED[key] = _moment(stored, now)
    return stored == now.isoformat()


def _moment(stored: str, fallback: datetime) -> datetime:
    try:
        return datetime.fromisoformat(stored)
    except ValueError:
        return fallback
