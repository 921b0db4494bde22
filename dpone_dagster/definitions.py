"""The code location's one entry point: every domain's `defs`, merged, bound to the deployment's workspace.

Each domain hands over its definitions through `build_defs()` in `dpone_dagster/defs/<domain>/__init__.py`;
this file calls each once and merges them. The dbt and lake domains are built with the integration
package exactly as an adopter's location is (`dpone_dagster.integration`), which also sets the code
location's default executor: the standard multiprocess/in-process executor, wrapped so that every
run (the implicit asset job behind "Materialize" included) is checked against and stamped with the
deployment's `dpone/workspace` before any step starts (`dpone_dagster.integration.binding`).

In a Dagster+ branch deployment the module first ensures the branch's fork
(`dpone_dagster.workspaces.branch`), so a fresh branch deployment loads against an existing fork.

What a reader could get wrong: a job that names its own executor does not get this default; such a
job must use a bound executor itself (`release_job` uses `IN_PROCESS_EXECUTOR`).
"""

from __future__ import annotations

from dagster import Definitions

from dpone_dagster.config import load_config


def _ensure_branch_fork():
    """In a Dagster+ branch deployment, its fork exists (or, PR closed/merged, is dropped) before any
    domain loads: the jobs take the fork's `dpone/workspace` tag at load. Elsewhere this only reads
    the configuration: no control-store access, and the fork service is not even imported (it
    pulled in the control store's SQLAlchemy models: ~0.1-0.3 s of every load and run worker)."""
    if load_config().branch_deployment is None:
        return None
    from dpone_dagster.workspaces.branch import ensure_for_deployment

    return ensure_for_deployment()


BRANCH_FORK = _ensure_branch_fork()

from dpone_dagster.defs import dbt, lake, release  # noqa: E402

defs = Definitions.merge(dbt.build_defs(), lake.build_defs(), release.build_defs())
