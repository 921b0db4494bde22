"""`WarmRunLauncher`: Dagster's run launcher, except that a run starts in a worker that already loaded the code.

With Dagster's `DefaultRunLauncher` a run launched from the UI, GraphQL or a sensor goes to the code
server (gRPC `StartRun`), which spawns a new process that imports Dagster and loads the definitions
again before the first step. This launcher keeps one pre-started worker per code location
(`integration/warm/worker.py`: the location's own interpreter and working directory, this process's
environment, the definitions loaded from the same origin the run carries) and hands it the run; the
worker executes it with the body of `dagster api execute_run`, and the launcher starts the next worker.
One run per worker process, as before.

It takes the default path (the wrapped `DefaultRunLauncher`) whenever it cannot: no worker ready (the
first run of a location after a start), a location it does not start itself, a stale worker (Python
or dbt project files changed since it loaded, `integration/warm/fingerprint.py`), an unconfined
process acting for a fork, or any error before the worker took the run. Every run records which
path it took: the tag `dpone/run_launcher` (`warm` or `default`), on a fallback the tag
`dpone/run_launcher_fallback` with the reason's code (`WarmFallback`), and an engine event saying why.

- `terminate(run_id)`: a warm run is reported CANCELING and its worker (the pid in the run's tag
  `dpone/warm_worker`, checked against its start time) gets SIGINT, which Dagster's interrupt handling
  turns into a CANCELED run; any other run goes to the default launcher's gRPC cancellation. This works
  from another process than the one that launched (the webserver cancels what the daemon launched).
- a worker that exits before its run finished (killed, crashed) makes the run FAILURE with an engine
  event naming the exit (CANCELED when it was being canceled): a thread of the launching process waits
  for each worker.

- `check_run_worker_health(run)` (Dagster's run monitoring, in the daemon): a warm run whose worker
  (pid + start time from its tag) is gone is FAILED, so a worker that dies after its launching process
  died is still seen; a fork's `dagster.yaml` turns run monitoring on (`workspaces/dagster_home.py`).

What a reader could get wrong: the crash watcher lives in the process that launched the run; without
run monitoring (a home that did not enable it, or no daemon), a worker that dies after its launching
process died leaves its run STARTED. Default-path runs are reported RUNNING to the health check (the
default launcher has none): they are not monitored, as before. Dagster's own internals used here (the
default launcher, `_execute_run_command_body`) stay in this package.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, DefaultRunLauncher, Field
from dagster._core.launcher.base import CheckRunHealthResult, LaunchRunContext, RunLauncher, WorkerStatus
from dagster._serdes import ConfigurableClass, ConfigurableClassData, serialize_value

from dpone_dagster.integration.warm.pool import WarmFallback, WarmPool, WarmWorker, WorkerSpec

LAUNCHER_TAG = "dpone/run_launcher"
FALLBACK_TAG = "dpone/run_launcher_fallback"
WORKER_TAG = "dpone/warm_worker"
WARM, DEFAULT = "warm", "default"
DEFAULT_HANDOFF_TIMEOUT_SECONDS = 30.0


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22); None if gone,
    or a zombie (exited, not yet reaped by its parent: it runs nothing any more)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except (OSError, IndexError):
        return None


def started_here(location_origin: object, executable_path: str) -> bool:
    """Whether the code location's server was started by this process tree, from a local interpreter.

    The webserver started by `dagster-webserver -w` starts its code servers itself (a managed origin);
    under `dagster dev` the webserver sees them as `grpc_server` entries on a local socket or port that
    carry the managed server's load target as `additional_metadata`. A `grpc_server` entry without that
    (a code server started elsewhere, maybe with another environment) is not a location to warm."""
    from dagster._core.remote_origin import GrpcServerCodeLocationOrigin, ManagedGrpcPythonEnvCodeLocationOrigin

    if not os.path.isfile(executable_path):
        return False
    if isinstance(location_origin, ManagedGrpcPythonEnvCodeLocationOrigin):
        return True
    if not isinstance(location_origin, GrpcServerCodeLocationOrigin):
        return False
    local = location_origin.socket is not None or location_origin.host in ("localhost", "127.0.0.1", "::1")
    loaded = (location_origin.additional_metadata or {}).get("executable_path")
    return local and loaded is not None and os.path.realpath(loaded) == os.path.realpath(executable_path)


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"with code {returncode}"


class WarmRunLauncher(RunLauncher, ConfigurableClass):
    """Launches runs in pre-started workers that loaded the code location; see the module docstring."""

    def __init__(
        self,
        inst_data: ConfigurableClassData | None = None,
        handoff_timeout_seconds: float = DEFAULT_HANDOFF_TIMEOUT_SECONDS,
    ) -> None:
        self._inst_data = inst_data
        self._handoff_timeout = float(handoff_timeout_seconds)
        self._default = DefaultRunLauncher()
        self._pool = WarmPool()
        self._warm_runs: set[str] = set()
        self._lock = threading.Lock()
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Field]:
        return {
            "handoff_timeout_seconds": Field(
                float,
                is_required=False,
                default_value=DEFAULT_HANDOFF_TIMEOUT_SECONDS,
                description="How long a ready worker may take to accept a run before the default path is taken.",
            )
        }

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> WarmRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    def register_instance(self, instance: DagsterInstance) -> None:
        super().register_instance(instance)
        self._default.register_instance(instance)

    # launching

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        try:
            spec = self._spec(context)
        except WarmFallback as reason:
            self._launch_default(context, reason)
            return
        worker = self._pool.take(spec.key)
        if worker is None:
            self._pool.start(spec)  # for the next run
            self._launch_default(context, WarmFallback("warm.worker_unavailable", "no warm worker was started yet"))
            return
        try:
            self._instance.add_run_tags(
                run.run_id, {LAUNCHER_TAG: WARM, WORKER_TAG: f"{worker.pid}:{process_start(worker.pid)}"}
            )
            worker.hand(run.run_id, spec.hello["instance_ref"], self._handoff_timeout)
        except WarmFallback as reason:
            self._replace(worker, spec, keep_loading=reason.code == "warm.worker_unavailable")
            self._launch_default(context, reason)
            return
        except Exception as exc:
            self._replace(worker, spec, keep_loading=False)
            self._launch_default(context, WarmFallback("warm.handoff_failed", type(exc).__name__))
            return
        with self._lock:
            self._warm_runs.add(run.run_id)
        worker.watch(lambda returncode: self._worker_exited(run.run_id, worker.pid, returncode))
        self._instance.report_engine_event(
            f"Launched in a warm run worker (pid {worker.pid}) that had loaded the code location.",
            run,
            cls=type(self),
        )
        self._pool.start(spec)  # the next warm worker

    def _replace(self, worker: WarmWorker, spec: WorkerSpec, *, keep_loading: bool) -> None:
        if keep_loading:
            self._pool.put_back(worker)
        else:
            worker.kill()
            self._pool.start(spec)

    def _launch_default(self, context: LaunchRunContext, reason: WarmFallback) -> None:
        run = context.dagster_run
        self._instance.add_run_tags(run.run_id, {LAUNCHER_TAG: DEFAULT, FALLBACK_TAG: reason.code})
        self._instance.report_engine_event(
            f"Launched through the code server (default run launcher): [{reason.code}] {reason.message}.",
            run,
            cls=type(self),
        )
        self._default.launch_run(context)

    def _spec(self, context: LaunchRunContext) -> WorkerSpec:
        """How to start a worker for the run's code location; `WarmFallback` when this process must not."""
        from dpone_dagster.config import load_config
        from dpone_dagster.confinement.status import is_confined
        from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
        from dpone_dagster.errors import DponeError

        run = context.dagster_run
        code_origin = run.job_code_origin
        remote_origin = run.remote_job_origin
        if context.workspace is None or code_origin is None or remote_origin is None:
            raise WarmFallback("warm.location_not_local", "the run carries no code origin to start a worker for")
        location = context.workspace.get_code_location(
            remote_origin.repository_origin.code_location_origin.location_name
        )
        repository = code_origin.repository_origin
        if not started_here(location.origin, repository.executable_path):
            raise WarmFallback("warm.location_not_local", "its code server is not one this process tree started")
        try:
            config = load_config()
        except DponeError as exc:
            raise WarmFallback("warm.unconfined", f"no dpone configuration to check confinement ({exc.code})") from None
        if config.workspace != ROOT_WORKSPACE and not is_confined(config):
            raise WarmFallback("warm.unconfined", f"this process acts for fork {config.workspace!r} unconfined")
        try:
            instance_ref = serialize_value(self._instance.get_ref())
        except Exception:
            raise WarmFallback("warm.location_not_local", "the instance has no reference a worker could open") from None
        return WorkerSpec(
            key=serialize_value(repository),
            executable=repository.executable_path,
            working_directory=getattr(repository.code_pointer, "working_directory", None),
            hello={"origin": serialize_value(repository), "instance_ref": instance_ref},
        )

    # after the launch

    def _worker_exited(self, run_id: str, pid: int, returncode: int) -> None:
        """The crash watcher: a run still in progress when its worker exited ends FAILURE (or CANCELED)."""
        with self._lock:
            self._warm_runs.discard(run_id)
        if not self.has_instance:
            return
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return
        message = f"The warm run worker (pid {pid}) exited {_exit_text(returncode)} before the run finished."
        self._instance.report_engine_event(message, run, cls=type(self))
        if run.status == DagsterRunStatus.CANCELING:
            self._instance.report_run_canceled(run, message=message)
        else:
            self._instance.report_run_failed(run, message=message)

    def terminate(self, run_id: str) -> bool:
        if not self.has_instance:
            return False
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        if run.tags.get(LAUNCHER_TAG) != WARM:
            return self._default.terminate(run_id)
        self._instance.report_run_canceling(run)
        pid = self._live_worker(run)
        if pid is None:
            self._instance.report_engine_event(
                "The warm run worker of this run is gone; nothing to interrupt.", run, cls=type(self)
            )
            return False
        os.kill(pid, signal.SIGINT)
        return True

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        """For Dagster's run monitoring (the daemon): a warm run whose worker is gone is FAILED.

        Only the run's tags are read (pid and start time of its worker), so any process on this machine
        answers for a run any other launched: the crash watcher of `launch_run` ends with its process,
        this does not. A default-path run is reported RUNNING: Dagster's default launcher offers no
        health check, so such a run is not monitored, as without this launcher."""
        if run.tags.get(LAUNCHER_TAG) != WARM:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "launched through the code server: not monitored")
        worker = run.tags.get(WORKER_TAG, "")
        if self._live_worker(run) is not None:
            return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=worker)
        message = f"The warm run worker ({worker or 'unrecorded'}) is gone while the run is {run.status.value}."
        return CheckRunHealthResult(WorkerStatus.FAILED, message, run_worker_id=worker)

    @staticmethod
    def _live_worker(run: DagsterRun) -> int | None:
        """The pid in the run's worker tag, if that process still lives (same pid and start time)."""
        pid_text, _, start = run.tags.get(WORKER_TAG, "").partition(":")
        if not pid_text.isdigit():
            return None
        pid = int(pid_text)
        return pid if process_start(pid) is not None and process_start(pid) == start else None

    def join(self, timeout: int = 30) -> None:
        deadline = time.monotonic() + timeout
        self._default.join(timeout)
        while self.has_instance:
            with self._lock:
                waiting = [run_id for run_id in self._warm_runs if self._unfinished(run_id)]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"warm runs still in progress after {timeout}s: {sorted(waiting)}")
            time.sleep(0.1)

    def _unfinished(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        return run is not None and not run.is_finished

    def idle_workers(self) -> list[WarmWorker]:
        """The warm workers started and not yet handed a run (for tests and diagnostics)."""
        return self._pool.idle()

    def dispose(self) -> None:
        self._pool.close()
        self._default.dispose()
