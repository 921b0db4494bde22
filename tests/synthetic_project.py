"""What the real `dbt_project_synthetic` contains, counted from its files, not written down.

Tests of the release path assert the number of native workloads a release of that project has;
the figure comes from the project's model files so adding a model cannot leave a test asserting
yesterday's number, and a pipeline that dropped or duplicated a model still fails.
"""

from __future__ import annotations

from pathlib import Path

import yaml

SYNTHETIC_PROJECT = Path(__file__).resolve().parent.parent / "dbt_project_synthetic"

NATIVE_MODELS = len(sorted((SYNTHETIC_PROJECT / "models").rglob("*.sql")))
"""One native workload per dbt model (seeds, tests and macros are not workloads)."""

_FLOWS = sorted(p.parent for p in (SYNTHETIC_PROJECT / "flows").glob("*/flow.yaml"))
ORDINARY_FLOWS = len(_FLOWS)
"""One ordinary workload per `flows/<dir>/flow.yaml`."""

PRE_HOOKS = sum(len(yaml.safe_load((d / "flow.yaml").read_text()).get("pre_hooks") or []) for d in _FLOWS)
"""One pre-hook task per declared `pre_hooks` entry."""

TASKS = NATIVE_MODELS + ORDINARY_FLOWS + PRE_HOOKS
