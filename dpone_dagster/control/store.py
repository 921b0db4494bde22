"""The control store: dpone-dagster's own small relational state, through SQLAlchemy Core.

SQLite file in the state directory by default; a PostgreSQL URL (`postgresql+psycopg://…`) in
production. Each domain declares its tables on the shared `METADATA` in its own module
(`dpone_dagster/control/<domain>_tables.py`) and calls `open_store()` to get an engine whose tables
exist. What a reader could get wrong: `create_all` only creates missing tables; it never alters one,
so a column change needs an explicit migration.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from dpone_dagster.errors import DponeError

METADATA = sa.MetaData()


class ControlStoreError(DponeError):
    code = "control_store.unavailable"


def _register_tables() -> None:
    """Import every domain's table module so `METADATA` is complete before `create_all`."""
    import importlib
    import pkgutil

    import dpone_dagster.control as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name.endswith("_tables"):
            importlib.import_module(f"{package.__name__}.{module.name}")


@lru_cache(maxsize=16)
def open_store(url: str) -> Engine:
    """Engine for `url` with every registered table created. Cached per URL (one pool each)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
    else:
        engine = sa.create_engine(url, pool_pre_ping=True)
    _register_tables()
    try:
        METADATA.create_all(engine)
    except sa.exc.OperationalError:
        raise ControlStoreError(f"the control store ({parsed.get_backend_name()}) cannot be reached") from None
    return engine


def reset_store_cache() -> None:
    """Forget cached engines (tests that point the store at a new database call this)."""
    open_store.cache_clear()
