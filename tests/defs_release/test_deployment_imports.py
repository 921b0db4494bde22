"""The deployment location never imports the release group's entry point (`dpone_dagster.defs`), not even
transitively, and the release/runtime/platform services it uses import no entry point at all (read with `ast`)."""

from __future__ import annotations

import subprocess
import sys

from tests.release.test_import_graph import _modules, import_graph

ENTRY_POINTS = ("defs", "deployment", "cli")


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        for target in graph.get(module, ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_no_deployment_module_reaches_defs_even_transitively():
    graph = import_graph(_modules())
    deployment = [module for module in graph if module.startswith("dpone_dagster.deployment")]
    assert "dpone_dagster.deployment.location" in deployment
    reached = {(module, target) for module in deployment for target in _reachable(graph, module) if target.startswith("dpone_dagster.defs")}
    assert reached == set()


def test_runtime_and_platform_services_import_no_entry_point():
    graph = import_graph(_modules())
    upward = {
        (module, target)
        for module, targets in graph.items()
        if module.split(".")[1:2] in (["runtime"], ["platform"])
        for target in targets
        if target.split(".")[1] in ENTRY_POINTS
    }
    assert upward == set()


def test_loading_the_deployment_location_module_loads_no_defs_module():
    code = (
        "import sys, dpone_dagster.deployment.location, dpone_dagster.deployment.jobs;"
        "print(sorted(m for m in sys.modules if m.startswith('dpone_dagster.defs')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
