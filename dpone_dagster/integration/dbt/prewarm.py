"""A dbt that is imported before the run needs it: a small fork server beside a process that executes runs.

Every dbt command a run starts is a new Python process that spends ~1.3 s importing dbt-core and
dbt-duckdb before it reads a file (measured in `docs/scale.md`, about 40% of a one-model `dbt build`).
A process that executes runs (`executes_runs`: a run worker, a warm run worker, `dagster asset
materialize`) calls `start()` when it first imports `dpone_dagster.integration.dbt` (the package's
`__init__`, before dagster-dbt's own 1.1 s import), while its definitions load or it waits for its
run: a server process (`server_command`) listens on a Unix socket in a
private folder (mode 0700) and imports dbt. `prewarmed_client()` is then the `dbt` that process's dbt
resource runs (`integration/dbt/cli.py`): `prewarm_client.py`, written next to the socket, which hands
the server its standard streams, arguments, working directory and environment. For each command the
server forks a handler, which forks the dbt process: it takes those streams as its own, replaces its
environment and working directory with the client's, and runs dbt's own entry point
(`dbt.cli.main.cli`, what the `dbt` script runs). The handler tells the client the dbt process's pid
(the process starts only then), kills it if the client goes away (`pidfd` and the socket, in one
`select`), and reports how it ended.

What a reader could get wrong:
- the dbt process is a child of the server, not of the process that runs the op; the server is a
  child of that process, so a kernel confinement it is under (`confinement/`) binds the server and
  every dbt process it forks, exactly as it binds a `dbt` it starts itself
  (`tests/confinement/test_dbt_doors.py` runs the doors both ways). A process confined only after it
  started the server (`confine_this_process`) no longer uses it: `prewarmed_client()` compares the
  launcher's marker then and now.
- the server forks only while it has one thread (checked before it accepts); importing dbt starts none.
  It also imports the dpone dbt plugin (`lake/dbt_plugin.py`), which reads nothing at import: each
  command's environment, configuration and lake are read when dbt-duckdb opens its connection.
- it listens before it imports, so a command started while dbt is still importing waits for the
  import instead of paying it again; with no server, one that ends or one that does not answer in 20 s, the client
  runs the real `dbt` in its own place (`os.execv`), so a run never depends on it.
- it ends with the process that started it (`PR_SET_PDEATHSIG`, ~150 MB of imported dbt until then);
  the folder with the socket and client is removed at that process's exit. `DPONE_DBT_PREWARM=0`
  turns it off.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path

CLIENT_NAME = "dbt"
SOCKET_NAME = "socket"
OPT_OUT_ENV = "DPONE_DBT_PREWARM"
WARM_WORKER_FLAG = "--warm-control"  # on a warm run worker's command line (integration/warm/worker.py)
_RUN_COMMANDS = (("api", "execute_run"), ("api", "resume_run"), ("asset", "materialize"), ("job", "execute"))
_PR_SET_PDEATHSIG = 1
_started: Path | None = None
_started_confined: str | None = None


def command_among(commands: tuple[tuple[str, str], ...], argv: list[str] | None = None, *, spawned=None) -> bool:
    """Whether this process's Dagster command line (`argv[1:3]`) is one of `commands`. A run launched
    through a code server executes in a `multiprocessing` child it spawns (`start_run_in_subprocess`),
    which carries the server's `api grpc` command line: it counts as `api execute_run`. `spawned`
    defaults to whether this process has a multiprocessing parent."""
    args = tuple(sys.argv[1:3] if argv is None else argv[1:3])
    if args in commands:
        return True
    if args != ("api", "grpc") or ("api", "execute_run") not in commands:
        return False
    if spawned is None:
        import multiprocessing

        spawned = multiprocessing.parent_process() is not None
    return bool(spawned)


def executes_runs(argv: list[str] | None = None, *, spawned: bool | None = None) -> bool:
    """True in a process that executes whole runs: a run worker (`api execute_run|resume_run`, not a
    step worker), a code server's spawned run child, or a Dagster CLI command that executes in process
    (`asset materialize`, `job execute`)."""
    return command_among(_RUN_COMMANDS, argv, spawned=spawned)


def installed_dbt() -> str | None:
    """The `dbt` installed next to this interpreter (the only one the client stands in for)."""
    beside = Path(sys.executable).with_name("dbt")
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def start_if_executing_runs() -> str | None:
    """`start()` in a process that executes runs (`executes_runs`) with an installed dbt, unless turned
    off; called when `dpone_dagster.integration.dbt` is first imported, before dagster-dbt's own import
    (1.1 s), so that dbt is imported by the time the run's first command starts."""
    real = installed_dbt()
    if real is None or not wanted() or not executes_runs():
        return None
    if WARM_WORKER_FLAG in sys.argv:  # a warm worker starts it once loaded (`start_for_warm_worker`)
        return None
    return start(real)


def start_for_warm_worker() -> str | None:
    """`start()` in a warm run worker that loaded dpone's dbt integration, once its definitions are
    loaded: a warm worker loads while the previous run still runs, and on two cores a dbt import at
    the same time slowed that run by ~0.3 s; its own run arrives seconds later."""
    real = installed_dbt()
    if real is None or not wanted() or "dpone_dagster.integration.dbt.cli" not in sys.modules:
        return None
    return start(real)


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """False when `DPONE_DBT_PREWARM=0`: every dbt command then starts as a new process, as before."""
    return (os.environ if environ is None else environ).get(OPT_OUT_ENV, "1") != "0"


def _confinement() -> str | None:
    """The fork this process is kernel-confined for (the launcher's marker), or None."""
    from dpone_dagster.confinement.status import MARKER_ENV

    return os.environ.get(MARKER_ENV) or None


def prewarmed_client() -> str | None:
    """The `dbt` client of the server this process started (`start`), or None; None too when this
    process was confined after the server started (its dbt processes would not be)."""
    if _started is None or _confinement() != _started_confined:
        return None
    return str(_started / CLIENT_NAME)


def is_prewarmed_client(executable: str) -> bool:
    return _started is not None and Path(executable) == _started / CLIENT_NAME


def start(real_dbt: str) -> str | None:
    """Start this process's server (once) and return its client's path; `real_dbt` is what the client
    runs when the server cannot. None when it cannot start (no temp folder, no process): every dbt
    command then starts as before."""
    global _started, _started_confined
    if _started is not None:
        return str(_started / CLIENT_NAME)
    folder = None
    try:
        folder = Path(tempfile.mkdtemp(prefix="dpone-dbt-"))
        client = write_client(folder, folder / SOCKET_NAME, real_dbt)
        subprocess.Popen(
            server_command(folder / SOCKET_NAME, os.getpid()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            close_fds=True,
        )
    except OSError:
        if folder is not None:
            shutil.rmtree(folder, True)
        return None
    atexit.register(shutil.rmtree, folder, True)
    _started, _started_confined = folder, _confinement()
    return str(client)


def server_command(socket_path: Path, parent: int) -> list[str]:
    """The server's command line (`-c`, not `-m`: running this module as `__main__` would import it twice,
    once through its package)."""
    code = f"import sys; from {__name__} import serve; sys.exit(serve(sys.argv[1], int(sys.argv[2])))"
    return [sys.executable, "-c", code, str(socket_path), str(parent)]


def write_client(folder: Path, socket_path: Path, real_dbt: str) -> Path:
    """`prewarm_client.py` as the executable `folder/dbt`, talking to `socket_path`."""
    source = Path(__file__).with_name("prewarm_client.py").read_text(encoding="utf-8")
    source = source.replace('SOCKET_PATH = ""', f"SOCKET_PATH = {str(socket_path)!r}", 1)
    source = source.replace('REAL_DBT = ""', f"REAL_DBT = {real_dbt!r}", 1)
    client = folder / CLIENT_NAME
    client.write_text(f"#!{sys.executable} -I\n{source}", encoding="utf-8")
    client.chmod(0o700)
    return client


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def serve(socket_path: str, parent: int) -> int:
    """Listen at once, import dbt, then fork one handler per connection until the `parent` process ends.
    A client that connects while dbt is still importing waits in the backlog (`prewarm_client.py`)."""
    _die_with_parent()
    if os.getppid() != parent:
        return 1  # it ended before the death signal was asked for
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o077)
    try:
        listener.bind(socket_path)
    finally:
        os.umask(previous)
    listener.listen(16)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches each dbt process itself
    import dbt.adapters.duckdb  # noqa: F401  (the point of this process)
    import dbt.cli.main  # noqa: F401

    import dpone_dagster.lake.dbt_plugin  # noqa: F401  (the plugin a dpone profile names: ~0.2 s of imports)

    if threading.active_count() != 1 or os.getppid() != parent:
        listener.close()  # forking with threads is unsafe: waiting clients see the end and run the real dbt
        return 1
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    while True:
        conn, _ = listener.accept()
        if not _from_a_sibling(conn, parent):
            conn.close()  # the client sees the end and runs the real dbt in its own place
            continue
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _handle(conn)
            finally:
                os._exit(0)
        conn.close()


def _from_a_sibling(conn: socket.socket, parent: int) -> bool:
    """Whether the connecting process is a child of this server's own parent (the dbt resource's client).

    Anything else is refused, whatever its user: a fork's confined process (a dbt python model, say)
    that found the socket of an unconfined prod process's server must not get a dbt forked outside its
    confinement. Landlock does not restrict connecting to a socket file; this check does."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    try:
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return uid == os.getuid() and ppid == parent


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    header, ancillary, _flags, _addr = conn.recvmsg(8, socket.CMSG_LEN(3 * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data), 4))
    length, body = int.from_bytes(header, "big"), b""
    while len(body) < length:
        chunk = conn.recv(min(65536, length - len(body)))
        if not chunk:
            raise ConnectionError("the client went away")
        body += chunk
    return json.loads(body), fds


def _handle(conn: socket.socket) -> None:
    try:
        request, fds = _receive(conn)
    except (OSError, ValueError):
        return
    if len(fds) != 3:
        return
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_write)
        _run_dbt(request, fds, conn, go_read)
    os.close(go_read)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        os.write(go_write, b"1")  # the client knows whom to signal: the dbt process may start
    except OSError:  # the client gave up waiting and runs the real dbt: this one never starts
        os.kill(pid, signal.SIGKILL)
    finally:
        os.close(go_write)
    ended = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([ended, conn], [], [])
        if ended in ready:
            break
        if not conn.recv(1):  # the client is gone: so is its command
            os.kill(pid, signal.SIGKILL)
            break
    _, status = os.waitpid(pid, 0)
    reply = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.WEXITSTATUS(status)}
    try:
        conn.sendall(json.dumps(reply).encode() + b"\n")
    except OSError:
        pass


def _run_dbt(request: dict, fds: list[int], conn: socket.socket, go: int) -> None:
    """In the forked dbt process: become the client's dbt command once the handler says go; never returns."""
    code = 1
    try:
        conn.close()
        if os.read(go, 1) != b"1":
            os._exit(1)
        os.close(go)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if os.environ.get("PYTHONUNBUFFERED"):  # read at start-up by a new interpreter (dagster-dbt sets it)
            for stream in (sys.stdout, sys.stderr):
                stream.reconfigure(write_through=True)
        sys.argv = [CLIENT_NAME, *request["argv"]]
        from dbt.cli.main import cli

        try:
            cli()  # what the `dbt` script runs; it ends in sys.exit
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # what the interpreter's exit runs: multiprocessing's clean-up, logging
        except BaseException:
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)
