"""The lake path, traced: `DuckLakeResource.connect` in a fork reads top-down, each module once.

docs/architecture.md ("The lake path") claims that following a workspace's lake from
`DuckLakeResource.connect` to its ATTACH statements reads top-down, each module once. This test
checks the claim on a real run instead of trusting the prose: a fork of a parent with built tables
(so there are defer views and an ancestor attach) that has built one table itself enters the
resource's `connect()` under `sys.setprofile`, and every Python *call* event into a `dpone_dagster`
module is recorded with the module of its nearest `dpone_dagster` caller. It does so twice: a run
process's first connect (which also registers the fork's place and records its use: two writes
that enter the control store again, asserted as exactly those) and the next one (no write), on
which every module is entered once.

Value modules are left out of the sequence: the rows the map's layer table calls `lake-values`,
`config`, `contracts` and `errors` (their paths are read from the table, not listed here). They are
pure data and are called from everywhere by design. A call is a new *stop* when it enters another
module than the one running (a function calling a helper of its own module reads on in the same
file, a method of another module's class does not); consecutive stops in one module collapse into
one. Then:

(a) each module once: no module is a stop twice (a second stop is a *re-entry*: the path left the
    module and came back, as a call-back through a method or a lambda does);
(b) top-down: no call goes from a module into a module whose row is above the caller's row in the
    layer table (a *climb*). A return is not a call: after the fork builder's control-store read
    returns, the resource may call `apply` although the control store's row is below it;
(c) the path ends in `apply` and the guard: every ATTACH runs in `lake/resolution/apply.py`, and
    after the first ATTACH each stop is `apply.py`, a module `apply.py` calls to run the plan, or
    under `lake/guard/`: nothing goes back to planning (the fork builder, tracking, the control
    store) once the lake is attached.

What a reader could get wrong: the sequence is printed on failure, one stop per line with its row
and caller, so a red run shows where the path turns back. A call into a value module is never a
stop, but a value module calling *up* into a service module is a stop (and a re-entry or a climb).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import dpone_dagster
from dpone_dagster.config import load_config
from tests.test_architecture import MAP, Row, read_layer_table, row_of

from .lakes import LakeEnv, materialize

PACKAGE_ROOT = Path(dpone_dagster.__file__).resolve().parent
VALUE_ROWS = ("lake-values", "config", "contracts", "errors")
"""Rows of the map's layer table whose modules are values (no I/O, no call-backs): not stops."""
PATH_END = ("lake/resolution/apply.py", "lake/guard/")
"""Where the path ends: the plan is applied (the ATTACHes), then the guarded connection is made."""


@dataclass(frozen=True)
class Stop:
    """One stop of the path: consecutive calls into `module` (a path under `dpone_dagster/`)."""

    module: str
    row: str
    caller: str | None
    caller_row: str | None
    function: str = ""


@dataclass(frozen=True)
class Executed:
    """One SQL text run on the connection: after how many calls, and the dpone_dagster modules
    on the stack when it ran (innermost first)."""

    after_calls: int
    sql: str
    stack: tuple[str, ...]

    @property
    def is_attach(self) -> bool:
        return self.sql.lstrip().upper().startswith("ATTACH")


def _module_path(name: str | None) -> str | None:
    module = sys.modules.get(name or "")
    file = getattr(module, "__file__", None)
    if not file:
        return None
    try:
        return Path(file).resolve().relative_to(PACKAGE_ROOT).as_posix()
    except ValueError:
        return None


def _dpone_module(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == "dpone_dagster" or name.startswith("dpone_dagster.") else None


class PathTracer:
    """Records, for every call into the package, the callee's module and the modules of the
    `dpone_dagster` frames below it (innermost first), and each SQL text a recording connection runs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[str, ...]]] = []
        self.executed: list[Executed] = []

    def _profile(self, frame, event, arg) -> None:
        if event != "call" or (name := _dpone_module(frame)) is None or frame.f_code.co_name == "<module>":
            return
        callers = _dpone_stack(frame.f_back)
        if callers is not None:
            self.calls.append((name, frame.f_code.co_name, callers))

    @contextmanager
    def tracing(self) -> Iterator[None]:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]

    def record(self, sql: str) -> None:
        self.executed.append(Executed(len(self.calls), sql, _dpone_stack(sys._getframe(1)) or ()))


def _dpone_stack(frame) -> tuple[str, ...] | None:
    """The `dpone_dagster` modules of `frame` and the frames below it, innermost first; None while
    a module body runs (an import on the way is not the path)."""
    found = []
    while frame is not None:
        if (name := _dpone_module(frame)) is not None:
            if frame.f_code.co_name == "<module>":
                return None
            found.append(name)
        frame = frame.f_back
    return tuple(found)


class RecordingConnection:
    """A DuckDB connection that tells the tracer each SQL text it runs (test code: never a stop)."""

    def __init__(self, conn, tracer: PathTracer) -> None:
        self._conn = conn
        self._tracer = tracer

    def execute(self, sql, *args, **kwargs):
        self._tracer.record(str(sql))
        return self._conn.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._conn, name)


@dataclass(frozen=True)
class LakePath:
    """The collapsed stops and, per SQL text run, the stop current then and the module running it."""

    stops: list[Stop]
    attaches: list[tuple[int, str | None]]
    """Per ATTACH: the index of the stop current when it ran, and the non-value module that ran it."""


def lake_path(tracer: PathTracer, rows: list[Row]) -> LakePath:
    """The collapsed sequence of stops, value modules left out (their rows are read from the table).

    A call is a new stop when its module is not the module of the nearest non-value frame below it:
    a function calling a helper of its own module reads on in the same file. Consecutive stops in
    one module collapse into one."""
    values = {row.package for row in rows if row.package in VALUE_ROWS}

    def stop_path(name: str | None) -> str | None:
        path = _module_path(name)
        return None if path is None or row_of(path, rows) in values else path

    stops: list[Stop] = []
    stop_at_call: list[int] = []
    for callee, function, callers in tracer.calls:
        path = stop_path(callee)
        reader = next((p for p in map(stop_path, callers) if p is not None), None)
        if path is not None and path != reader and (not stops or stops[-1].module != path):
            caller_path = _module_path(callers[0]) if callers else None
            caller_row = row_of(caller_path, rows) if caller_path else None
            stops.append(Stop(path, row_of(path, rows) or "?", caller_path, caller_row, function))
        stop_at_call.append(len(stops) - 1)
    attaches = []
    for run in tracer.executed:
        if run.is_attach:
            running = next((p for p in map(stop_path, run.stack) if p is not None), None)
            attaches.append((stop_at_call[run.after_calls - 1] if run.after_calls else -1, running))
    return LakePath(stops, attaches)


def climbs(path: LakePath, rows: list[Row]) -> list[Stop]:
    """Stops entered by a call from a row below the callee's (position 0 is the top of the table)."""
    position = {row.package: i for i, row in enumerate(rows)}
    return [s for s in path.stops if s.caller_row is not None and position[s.row] < position[s.caller_row]]


def reentries(path: LakePath) -> list[Stop]:
    """Stops into a module the path had already entered and left."""
    seen: set[str] = set()
    again = []
    for stop in path.stops:
        if stop.module in seen:
            again.append(stop)
        seen.add(stop.module)
    return again


def tail_problems(path: LakePath) -> list[str]:
    """Why the path does not end in apply and the guard after the ATTACHes (empty when it does):
    every ATTACH runs in `apply.py`, and from the first one on each stop is `apply.py`, a module
    `apply.py` itself calls (it runs the plan's statements) or the guard."""
    if not path.attaches:
        return ["no ATTACH ran"]
    problems = [f"an ATTACH ran in {running}" for _, running in path.attaches if running != PATH_END[0]]
    first = min(index for index, _ in path.attaches)
    problems += [
        f"stop {i} after the first ATTACH: {s.module} (from {s.caller})"
        for i, s in enumerate(path.stops)
        if i > first and PATH_END[0] not in (s.module, s.caller) and not s.module.startswith(PATH_END[1])
    ]
    return problems


def describe(path: LakePath, rows: list[Row]) -> str:
    """The path, one stop per line: module [row] <- caller [row], re-entries, climbs and ATTACHes marked."""
    again = {id(s) for s in reentries(path)}
    up = {id(s) for s in climbs(path, rows)}
    attach_at = [index for index, _ in path.attaches]
    lines = [
        f"{i:3} {s.module}:{s.function} [{s.row}] <- {s.caller} [{s.caller_row}]"
        + (" RE-ENTRY" if id(s) in again else "")
        + (" CLIMB" if id(s) in up else "")
        + (f" ATTACH x{attach_at.count(i)}" if i in attach_at else "")
        for i, s in enumerate(path.stops)
    ]
    modules = len({s.module for s in path.stops})
    return f"{len(path.stops)} stops in {modules} modules, {len(again)} re-entries, {len(up)} climbs:\n" + "\n".join(
        lines
    )


@dataclass(frozen=True)
class TracedConnects:
    cold: LakePath
    """The process's first connect to the fork: it also registers the fork's place and records its use."""
    warm: LakePath
    """The next one (within the registration TTL and the minute of the usage clock): no write."""
    rows: list[Row]


def _traced_connect(resource, tracer_for) -> PathTracer:
    tracer = tracer_for()
    session = resource.connect(targets=["mart.revenue"])
    with tracer.tracing():
        conn = session.__enter__()
    try:
        assert conn.execute("SELECT id FROM lake_main.orders").fetchall() == [(42,)]  # the fork's own
        assert conn.execute("SELECT day FROM lake_main.mart.daily").fetchall() == [(1,)]  # deferred
    finally:
        session.__exit__(None, None, None)
    return tracer


@pytest.fixture
def traced_fork_connects(monkeypatch) -> TracedConnects:
    """`DuckLakeResource.connect()` in a fork of a parent with three built tables, one of them rebuilt
    by the fork (so: defer views, an ancestor attach, a table of the fork's own), traced twice."""
    from dpone_dagster.control.store import open_store
    from dpone_dagster.integration.lake.resources import DuckLakeResource
    from dpone_dagster.lake import duck
    from dpone_dagster.lake.resolution import apply
    from dpone_dagster.lake.state import registry, usage
    from dpone_dagster.workspaces.service import Workspaces

    config = load_config()
    env = LakeEnv("embedded", config, list_files=lambda prefix: [])
    materialize(env, "prod", "orders", "SELECT range AS id FROM range(5)")
    materialize(env, "prod", "mart.revenue", "SELECT 7 AS total")
    materialize(env, "prod", "mart.daily", "SELECT 1 AS day")
    Workspaces(config).create_fork("wm-fork-path", "prod", owner="alice")
    materialize(env, "wm-fork-path", "orders", "SELECT 42 AS id")
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-path")
    # `connect()` applies the plan it has just made: the incarnation fence (a second control-store
    # read, for plans held across time, as dbt's) is skipped unless the machine stalls for a second.
    # Pinned, so a slow machine does not change the path this test reads.
    monkeypatch.setattr(apply, "FENCE_GRACE_S", 3600.0)
    # The materialize above registered the fork's place and recorded its use in this process:
    # forgotten, so the first traced connect is a run process's first.
    registry.CACHE.invalidate(str(open_store(config.control_store).url), "wm-fork-path")
    usage.forget_touches()

    tracers: list[PathTracer] = []
    real_connect = duck.connect
    monkeypatch.setattr(duck, "connect", lambda *a, **k: RecordingConnection(real_connect(*a, **k), tracers[-1]))

    def tracer_for() -> PathTracer:
        tracers.append(PathTracer())
        return tracers[-1]

    resource = DuckLakeResource()
    cold, warm = _traced_connect(resource, tracer_for), _traced_connect(resource, tracer_for)
    rows = read_layer_table(MAP.read_text(encoding="utf-8"))
    return TracedConnects(lake_path(cold, rows), lake_path(warm, rows), rows)


def test_the_fork_lake_path_enters_each_module_once(traced_fork_connects):
    path, rows = traced_fork_connects.warm, traced_fork_connects.rows
    assert [s.module for s in reentries(path)] == [], describe(path, rows)


def test_a_first_connect_enters_again_only_the_control_store_for_its_two_writes(traced_fork_connects):
    """The first connect of a process also registers the fork's place (the incarnation fence and the
    cleanup ledger, `lake/state/registry.py`) and records its use (`lake/state/usage.py`): two writes
    that enter the control store again after the builder's read. Nothing else is entered twice."""
    path, rows = traced_fork_connects.cold, traced_fork_connects.rows
    again = reentries(path)
    assert [(s.caller, s.module) for s in again if s.row != "control"] == [], describe(path, rows)
    assert sorted(s.caller for s in again) == ["lake/state/registry.py", "lake/state/usage.py"], describe(path, rows)


@pytest.mark.parametrize("connect", ["cold", "warm"])
def test_the_fork_lake_path_never_calls_up_the_layer_table(traced_fork_connects, connect):
    path, rows = getattr(traced_fork_connects, connect), traced_fork_connects.rows
    assert [(s.caller, s.module) for s in climbs(path, rows)] == [], describe(path, rows)


@pytest.mark.parametrize("connect", ["cold", "warm"])
def test_the_fork_lake_path_ends_in_apply_and_the_guard_after_the_attach(traced_fork_connects, connect):
    path, rows = getattr(traced_fork_connects, connect), traced_fork_connects.rows
    assert tail_problems(path) == [], describe(path, rows)
