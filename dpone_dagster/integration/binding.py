"""The workspace belongs to the deployment: every run of this code location acts for ONE workspace.

The workspace is the one the process's configuration names (`DPONE_WORKSPACE`, else `dpone.yaml`,
else `prod`; `dpone_dagster.config.load_config`), read from the environment the code location was
started with. Nothing a launch carries can choose another one:

- no resource or op exposes a configurable field that selects a workspace or a lake location (the
  `ducklake` and `dbt` resources have no run configuration; run config naming one fails validation);
- every run carries the `dpone/workspace` tag: defined jobs have it as a job tag, and `bind_run`
  stamps it on any run that lacks it (the implicit asset job, "Materialize" in the UI) through the
  code location's executor (`bound_executor`) and again in the `ducklake` resource's setup;
- a run whose `dpone/workspace` tag names another workspace is refused with
  `workspace.not_this_deployment` before any step starts, and again before any lake is attached.

Steps can ask for the run's shape through op tags (`route_run`): a step tagged `dpone/in_process:
true` makes the whole run execute in the run worker (the configured multiprocess executor is set
aside for that run), and a step's `dpone/release` tag is stamped on the run. The release stages
carry both, so "Materialize all" on group `release`, `dagster asset materialize --select
group:release` and `release_job` run the same way and are tagged the same. A step tagged
`dpone/in_process_alone: true` (the dbt op) runs in process when *every* step of the run carries it:
a dbt-only run (the fork inner loop) skips the step process and its second definitions load.

What a reader could get wrong: the tag is a record, never an input. A user can type
`dpone/workspace: prod` into the launchpad of a fork's UI; that run is refused, it does not act for
`prod`. And the executor wrapper is not the only guard: `execute_in_process` (and `materialize`)
replace the executor, so the `ducklake` resource repeats the check in `setup_for_execution`, which
every lake access in a run passes through.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dagster import (
    DagsterInstance,
    DagsterRun,
    Executor,
    ExecutorDefinition,
    in_process_executor,
    multi_or_in_process_executor,
)
from dagster._core.definitions.executor_definition import _core_in_process_executor_creation

from dpone_dagster.config import load_config
from dpone_dagster.confinement.status import check_fork_process
from dpone_dagster.errors import WorkspaceError

WORKSPACE_TAG = "dpone/workspace"
IN_PROCESS_TAG = "dpone/in_process"
"""Op tag: a step tagged `"true"` runs its whole run in the run worker (see `route_run`)."""
IN_PROCESS_ALONE_TAG = "dpone/in_process_alone"
"""Op tag: a run whose steps *all* carry it (e.g. a dbt-only run: one `dbt build` step) runs in the
run worker; mixed with other steps, the configured executor is kept (they may run in parallel)."""
RUN_TAG_KEYS = ("dpone/release",)
"""Op tags a step hands on to its run (the Runs list filters on them), e.g. `dpone/release`."""


class WorkspaceNotThisDeploymentError(WorkspaceError):
    """A launch asked for a workspace other than the one this deployment acts for."""

    code = "workspace.not_this_deployment"


def deployment_workspace() -> str:
    """The workspace this process acts for (its configuration's; fixed for the process's life).
    In a fork, an unconfined process warns once or, with `forks.require_confinement`, is refused."""
    config = load_config()
    check_fork_process(config)  # dpone_dagster/confinement: the code location's load passes here
    return config.workspace


def workspace_tags() -> dict[str, str]:
    """The job tags every defined job carries: `{"dpone/workspace": <deployment workspace>}`."""
    return {WORKSPACE_TAG: deployment_workspace()}


def check_tags(tags: Mapping[str, str], workspace: str | None = None) -> str:
    """The deployment's workspace; refuses tags whose `dpone/workspace` names another one."""
    workspace = workspace or deployment_workspace()
    asked = tags.get(WORKSPACE_TAG)
    if asked is not None and asked != workspace:
        raise WorkspaceNotThisDeploymentError(
            f"this run is tagged {WORKSPACE_TAG}={asked!r}, but this deployment acts for workspace "
            f"{workspace!r}; a run cannot choose its workspace (launch it from the deployment of {asked!r})"
        )
    return workspace


def bind_run(instance: DagsterInstance | None, run: DagsterRun | None) -> str:
    """Check a run's tag against the deployment and stamp the tag when it is missing.

    Returns the deployment's workspace. Without a run (sensors, direct use) there is nothing to
    check or stamp.
    """
    workspace = deployment_workspace()
    if run is None:
        return workspace
    check_tags(run.tags, workspace)
    stored = instance.get_run_by_id(run.run_id) if instance is not None else None
    if stored is not None:
        check_tags(stored.tags, workspace)
        if WORKSPACE_TAG not in stored.tags:
            instance.add_run_tags(run.run_id, {WORKSPACE_TAG: workspace})
    return workspace


def route_run(instance: DagsterInstance | None, run: DagsterRun | None, steps) -> bool:
    """Stamp the run with its steps' `RUN_TAG_KEYS` op tags; True when a step asks for in-process
    (`IN_PROCESS_TAG`) or every step may run in process (`IN_PROCESS_ALONE_TAG`).

    `steps` are the execution steps the run will execute (`ExecutionStep`s with `.tags`, the op
    tags). A tag already on the run is left alone (a job's own tags win).
    """
    tags: dict[str, str] = {}
    in_process = False
    alone = bool(steps)
    for step in steps:
        step_tags = step.tags or {}
        in_process = in_process or step_tags.get(IN_PROCESS_TAG) == "true"
        alone = alone and step_tags.get(IN_PROCESS_ALONE_TAG) == "true"
        tags.update({key: step_tags[key] for key in RUN_TAG_KEYS if key in step_tags})
    in_process = in_process or alone
    if instance is not None and run is not None:
        missing = {key: value for key, value in tags.items() if key not in run.tags}
        if missing:
            instance.add_run_tags(run.run_id, missing)
    return in_process


class _BoundExecutor(Executor):
    """Runs `bind_run` in the run worker before the wrapped executor starts any step.

    With an `in_process` twin (the default executor's), a run any of whose steps is tagged
    `dpone/in_process` executes on the twin instead (same retry mode, so the run's retry
    bookkeeping, read from `retries` before `execute`, is unchanged).
    """

    def __init__(self, inner: Executor, in_process: Executor | None = None) -> None:
        self._inner = inner
        self._in_process = in_process

    def execute(self, plan_context, execution_plan) -> Iterator:
        bind_run(plan_context.instance, plan_context.dagster_run)
        steps = [execution_plan.get_step_by_key(key) for key in execution_plan.step_keys_to_execute]
        executor = self._inner
        if route_run(plan_context.instance, plan_context.dagster_run, steps) and self._in_process is not None:
            executor = self._in_process
        yield from executor.execute(plan_context, execution_plan)

    @property
    def retries(self):
        return self._inner.retries

    @property
    def step_dependency_config(self):
        return self._inner.step_dependency_config

    def get_step_event_or_retry_event(self, *args, **kwargs):
        return self._inner.get_step_event_or_retry_event(*args, **kwargs)

    def log_failure_or_retry_event_after_error(self, *args, **kwargs):
        return self._inner.log_failure_or_retry_event_after_error(*args, **kwargs)


class BoundExecutorDefinition(ExecutorDefinition):
    """An executor definition whose executors run `bind_run` before any step (see `bound_executor`)."""


def bound_executor(inner: ExecutorDefinition, *, routed: bool = False) -> BoundExecutorDefinition:
    """`inner` with the same name, config schema and requirements, checking the run's workspace first.

    `routed` (for `multi_or_in_process_executor`): a run with a step tagged `dpone/in_process`
    executes in process whatever mode the run's configuration picked.
    """
    create = inner.executor_creation_fn
    if create is None:
        raise WorkspaceError(
            "an executor without a creation function cannot be bound to the deployment",
            code="workspace.executor_unbindable",
        )

    def creation(init_context) -> _BoundExecutor:
        return _BoundExecutor(create(init_context), _in_process_twin(init_context.executor_config) if routed else None)

    return BoundExecutorDefinition(
        name=inner.name,
        config_schema=inner.config_schema,
        requirements=inner.get_requirements,
        executor_creation_fn=creation,
        description=inner.description,
    )


def _in_process_twin(config: Mapping) -> Executor:
    """An in-process executor with the retry mode of the configured mode (multiprocess or in_process)."""
    mode = config.get("multiprocess") or config.get("in_process") or {}
    return _core_in_process_executor_creation(
        {
            "retries": mode.get("retries") or {"enabled": {}},
            "step_dependency_config": mode.get("step_dependency_config"),
        }
    )


DEFAULT_EXECUTOR = bound_executor(multi_or_in_process_executor, routed=True)
IN_PROCESS_EXECUTOR = bound_executor(in_process_executor)
