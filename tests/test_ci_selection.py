"""`make test` keeps the long scenarios tests/conftest.py names (`CI_KEEPS_SLOW`): every entry must still
name a collected `slow` test, or CI would silently stop running that kind."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import CI_KEEPS_SLOW, REPO_ROOT


def test_every_kept_slow_scenario_is_a_collected_slow_test() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "slow and ci",
            "tests",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    kept = {line.split("@", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    unmatched = sorted(k for k in CI_KEEPS_SLOW if k not in kept and not any(i.split("[", 1)[0] == k for i in kept))
    assert unmatched == [], f"CI_KEEPS_SLOW names no collected slow test: {unmatched}"
    assert len(kept) >= len(CI_KEEPS_SLOW)
