"""The tiny code location the warm-launcher tests serve (copied into each test's folder as `warm_location.py`).

`ok` materializes, `broken` raises, `slow` writes its pid to `$WARM_TEST_DIR/slow.pid` and then
sleeps in short steps for up to a minute (so a test can terminate or kill its worker mid-run). The
executor is dpone's bound in-process executor: every run is checked against the deployment's workspace.
"""

import os
import time
from pathlib import Path

from dagster import Definitions, asset

from dpone_dagster.integration.binding import IN_PROCESS_EXECUTOR


@asset
def ok() -> int:
    return 1


@asset
def broken() -> int:
    raise ValueError("broken on purpose")


@asset
def slow() -> int:
    Path(os.environ["WARM_TEST_DIR"], "slow.pid").write_text(str(os.getpid()))
    for _ in range(600):
        time.sleep(0.1)
    return 1


defs = Definitions(assets=[ok, broken, slow], executor=IN_PROCESS_EXECUTOR)
