"""Loading the deployment location imports no module of the release group's entry point (`dpone_dagster.defs`).

That no deployment module imports `defs/`, even transitively, and that the release services import no
entry point, is read statically from the map's layer table (`tests/test_architecture.py`); this test
loads the location in a fresh interpreter, so an import made some other way would show up too.
"""

from __future__ import annotations

import subprocess
import sys


def test_loading_the_deployment_location_module_loads_no_defs_module():
    code = (
        "import sys, dpone_dagster.deployment.location, dpone_dagster.deployment.jobs;"
        "print(sorted(m for m in sys.modules if m.startswith('dpone_dagster.defs')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
