"""The `dbt` a warm run worker hands dagster-dbt: it runs the command in a dbt that is already imported.

`prewarm.py` writes this file's source, after a shebang line naming the worker's interpreter and the
two constants below, as an executable named `dbt` beside its server's socket. dagster-dbt starts it
exactly as it starts dbt (arguments, environment, working directory, stdout and stderr into one
pipe); it connects to the server, hands over its three standard streams, its arguments, working
directory and whole environment, and the server forks a process that has imported dbt, which runs
the command writing straight into those streams. This process waits, forwards SIGINT, SIGTERM and
SIGHUP (dagster-dbt's cancellation sends SIGINT) to that dbt process, and ends as it ended: the same
exit code, or killed by the same signal.

What a reader could get wrong: it imports only the standard library and runs with `-I` (no
site-packages), so it starts in milliseconds. A server still importing dbt has its socket listening
already: the client waits for it (up to `STARTUP_TIMEOUT_SECONDS`). When the server is not there, ends
without answering or does not answer in time, the client *becomes* the real dbt (`os.execv`), and a
late server never starts the command (it waits for the pid to reach the client): the command runs once.
It says so in one line on stderr, which dagster-dbt copies into the run's compute log.
"""

import array
import json
import os
import signal
import socket
import sys
import time

SOCKET_PATH = ""  # set in the generated file
REAL_DBT = ""  # set in the generated file
STARTUP_TIMEOUT_SECONDS = 20
BIND_WAIT_SECONDS = 2
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _real_dbt(argv, reason):
    sys.stderr.write(f"dpone: no pre-imported dbt answered ({reason}); starting dbt itself\n")
    sys.stderr.flush()
    os.execv(REAL_DBT, [REAL_DBT, *argv])


def _lines(sock):
    buffered = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            yield json.loads(line)


def _connect(sock):
    """Connect, waiting up to `BIND_WAIT_SECONDS` for a server started a moment ago to bind its socket
    (this file exists only because a server was started)."""
    deadline = time.monotonic() + BIND_WAIT_SECONDS
    while True:
        try:
            return sock.connect(SOCKET_PATH)
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def main(argv):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(STARTUP_TIMEOUT_SECONDS)  # the server may still be importing dbt
    try:
        _connect(sock)
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        streams = array.array("i", [0, 1, 2])
        sock.sendmsg([len(request).to_bytes(8, "big")], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, streams)])
        sock.sendall(request)
        replies = _lines(sock)
        started = next(replies, None)
        reason = "it ended" if started is None else "it refused"
    except (OSError, ValueError) as exc:
        started, reason = None, type(exc).__name__
    if not started or "pid" not in started:
        sock.close()
        _real_dbt(argv, reason)
    pid = started["pid"]
    sock.settimeout(None)  # the command takes as long as it takes
    for forwarded in _FORWARDED:
        signal.signal(forwarded, lambda number, _frame: os.kill(pid, number))
    ended = next(replies, None)
    if ended is None:  # the server's side went away: the dbt process is killed with it
        sys.stderr.write("dpone: the pre-imported dbt server went away during the command\n")
        return 1
    if "signal" in ended:  # end as dbt ended: killed by the same signal
        if ended["signal"] not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(ended["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), ended["signal"])
    return int(ended.get("exit", 1))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
