"""The launcher's side of warm run workers: start one, know when it is ready, hand it a run, watch it.

`WarmWorker` is one worker process (`integration/warm/worker.py`) and the two pipes to it; a reader
thread turns its answers into a queue and sets `ready`. `WarmPool` keeps at most one idle worker per
code location (keyed by the serialized repository origin its runs carry) and starts the next one.

What a reader could get wrong:
- a worker is a child of the process that calls `start` (the webserver with the default run
  coordinator, the daemon with the queued one) and inherits that process's environment, kernel
  confinement (`dpone dev` confines the whole `dagster dev` tree before it starts) and process group;
  the launcher only starts workers from a process it found confined when acting for a fork.
- `hand` raises `WarmFallback` whenever the run is *not* the worker's (still loading, stale, no
  answer): only after `{"started"}` does the run belong to the worker, so a fallback never executes
  a run twice. A worker that does not answer within the timeout is killed first.
- an idle worker ends when its input pipe closes (`close`), so a pool left behind by a process that
  exits leaves no process behind either.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.integration.warm import worker as worker_module


class WarmFallback(CodedError):
    """Why a run was not handed to a warm worker; the launcher records it and takes the default path."""

    codes = {
        "warm.worker_unavailable": "No warm run worker was ready for the code location (the first run after a "
        "start, or the previous worker was still loading); the run was launched through the code server.",
        "warm.code_stale": "A Python file or a dbt project file the warm worker loaded changed since it loaded; "
        "the run was launched through the code server, which loads the code again.",
        "warm.location_not_local": "The run's code location is not one this process starts itself (a code server "
        "elsewhere, or no local interpreter); the run was launched through the code server.",
        "warm.unconfined": "This process acts for a fork but is not kernel-confined, so it starts no worker; the "
        "run was launched through the code server.",
        "warm.handoff_failed": "The warm worker did not take the run (it failed to load, exited or did not "
        "answer); the run was launched through the code server.",
    }


@dataclass(frozen=True)
class WorkerSpec:
    """How to start a warm worker for one code location."""

    key: str
    executable: str
    working_directory: str | None
    hello: Mapping[str, Any]


class WarmWorker:
    """One warm worker process (see the module docstring)."""

    def __init__(self, spec: WorkerSpec, env: Mapping[str, str]) -> None:
        self.spec = spec
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        command = [
            spec.executable,
            "-m",
            worker_module.__name__,
            *worker_module.COMMAND,
            worker_module.CONTROL_FLAG,
            f"{to_worker_r},{from_worker_w}",
        ]
        try:
            self.process = subprocess.Popen(
                command,
                cwd=spec.working_directory,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                pass_fds=(to_worker_r, from_worker_w),
            )
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self._to_worker = os.fdopen(to_worker_w, "w", encoding="utf-8")
        self._from_worker = os.fdopen(from_worker_r, "r", encoding="utf-8")
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.ready = threading.Event()
        threading.Thread(target=self._read_answers, name="dpone-warm-worker-reader", daemon=True).start()
        self._send(spec.hello)

    @property
    def pid(self) -> int:
        return self.process.pid

    def _send(self, message: Mapping[str, Any]) -> None:
        self._to_worker.write(json.dumps(dict(message)) + "\n")
        self._to_worker.flush()

    def _read_answers(self) -> None:
        for line in self._from_worker:
            answer = json.loads(line)
            if "ready" in answer:
                self.ready.set()
            else:
                self._answers.put(answer)
        self._answers.put({"exited": True})

    def hand(self, run_id: str, instance_ref: str, timeout: float) -> None:
        """Give the worker `run_id`; returns once it said "started", else raises `WarmFallback`."""
        if self.process.poll() is not None:
            raise WarmFallback("warm.handoff_failed", f"the warm worker exited with code {self.process.returncode}")
        if not self.ready.is_set():
            raise WarmFallback("warm.worker_unavailable", "the warm worker was still loading the code location")
        try:
            self._send({"run_id": run_id, "instance_ref": instance_ref})
            answer = self._answers.get(timeout=timeout)
        except (OSError, queue.Empty):
            self.kill()
            raise WarmFallback("warm.handoff_failed", f"the warm worker did not answer within {timeout:g}s") from None
        if "started" in answer:
            return
        if "stale" in answer:
            raise WarmFallback("warm.code_stale", f"{answer['stale']} changed since the warm worker loaded")
        raise WarmFallback("warm.handoff_failed", str(answer.get("failed", "the warm worker exited")))

    def watch(self, on_exit: Callable[[int], None]) -> None:
        """Call `on_exit(returncode)` from a thread once the worker process ends."""

        def wait() -> None:
            on_exit(self.process.wait())

        threading.Thread(target=wait, name=f"dpone-warm-worker-{self.pid}", daemon=True).start()

    def close(self) -> None:
        """End an idle worker: its input closes and it exits (a worker executing a run is unaffected)."""
        try:
            self._to_worker.close()
        except OSError:
            pass

    def kill(self) -> None:
        self.close()
        if self.process.poll() is None:
            self.process.kill()


class WarmPool:
    """At most one idle warm worker per code location, started from this process."""

    def __init__(self, env: Callable[[], Mapping[str, str]] = lambda: os.environ) -> None:
        self._env = env
        self._idle: dict[str, WarmWorker] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> WarmWorker | None:
        with self._lock:
            return self._idle.pop(key, None)

    def put_back(self, worker: WarmWorker) -> None:
        """Keep a worker that was not ready yet for the next launch (another one may have been started)."""
        with self._lock:
            if worker.spec.key in self._idle:
                worker.close()
            else:
                self._idle[worker.spec.key] = worker

    def start(self, spec: WorkerSpec) -> WarmWorker:
        """The idle worker of `spec.key`, started now unless one is already waiting."""
        with self._lock:
            existing = self._idle.get(spec.key)
            if existing is not None and existing.process.poll() is None:
                return existing
            self._idle[spec.key] = WarmWorker(spec, self._env())
            return self._idle[spec.key]

    def idle(self) -> list[WarmWorker]:
        with self._lock:
            return list(self._idle.values())

    def close(self) -> None:
        with self._lock:
            workers, self._idle = list(self._idle.values()), {}
        for worker in workers:
            worker.close()
