"""Runs that start warm: a run launcher whose runs start in a process that already loaded the code location.

`launcher.WarmRunLauncher` (configured in a fork's embedded `dagster.yaml`, `workspaces/dagster_home.py`;
opt in elsewhere as docs/warm-runs.md says) hands each run to a pre-started `worker` and falls back to
Dagster's default launcher where it cannot; `pool` is its side of the worker processes, `fingerprint`
decides when a worker's loaded code is stale.

What a reader could get wrong: this package is the only place that reaches into Dagster's run-execution
internals (the default launcher, `dagster api execute_run`'s body); nothing else imports them.
"""
