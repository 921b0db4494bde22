"""The sealed dbt compile worker: `python -m dpone_dagster.release.build.dbt_worker REQUEST.json`.

`native.py` runs this module in a subprocess with a scrubbed environment (no inherited `DBT_*`,
credentials or home directory), so `env_var()` in a project cannot pull in machine state and the
compile depends only on the exact project, profile and selection inputs. It parses once, then
compiles and lists the selection from that one manifest, and writes a small JSON result. What a
reader could get wrong: the worker never prints dbt's messages through; the parent process receives
only the failing phase and dbt's short cause (its first three lines, bounded), from which it removes
the private directory before raising.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _cause(value: object) -> str:
    """dbt's error heading and explanation: the first three non-empty lines, each bounded."""
    lines = [line.strip()[:200] for line in str(value or "").splitlines() if line.strip()]
    return " / ".join(lines[:3]) or "dbt reported a failure"


def run(request: dict) -> dict:
    from dbt.cli.main import dbtRunner

    common = [
        "--project-dir",
        request["project_dir"],
        "--profiles-dir",
        request["profiles_dir"],
        "--target-path",
        request["target_dir"],
        "--log-path",
        request["log_dir"],
        "--no-partial-parse",
    ]
    flags = [
        "--no-version-check",
        "--no-send-anonymous-usage-stats",
        "--no-use-colors",
        "--quiet",
        "--log-level",
        "none",
    ]
    parsed = dbtRunner().invoke([*flags, "parse", *common])
    if not parsed.success:
        return {"ok": False, "phase": "parse", "cause": _cause(parsed.exception)}
    runner = dbtRunner(manifest=parsed.result)
    compiled = runner.invoke([*flags, "compile", *common, "--no-populate-cache"])
    if not compiled.success:
        failing = [
            str(getattr(r, "message", "")) for r in (compiled.result or []) if getattr(r, "status", "") == "error"
        ]
        return {
            "ok": False,
            "phase": "compile",
            "cause": _cause(compiled.exception or (failing[0] if failing else None)),
        }
    listed = runner.invoke(
        [*flags, "ls", *common, *request["selection"], "--output", "json", "--output-keys", "unique_id"]
    )
    if not listed.success:
        return {"ok": False, "phase": "select", "cause": _cause(listed.exception)}
    selected = sorted(json.loads(line)["unique_id"] for line in listed.result or [])
    return {"ok": True, "selected": selected}


def main(argv: list[str]) -> int:
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text(encoding="utf-8"))
    try:
        result = run(request)
    except Exception as error:  # dbt raises many types; the parent only needs "it failed, and where"
        result = {"ok": False, "phase": "worker", "cause": _cause(f"{type(error).__name__}: {error}")}
    Path(request["result_path"]).write_text(json.dumps(result), encoding="utf-8")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
