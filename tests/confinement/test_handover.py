"""The launcher hands over to a Python entry point of its own interpreter in-process (its imports are
the command's too), to anything else by exec; a command's exit status and errors stay its own."""

from __future__ import annotations

import subprocess
import sys

from dpone_dagster.confinement.handover import in_process_target

from .harness import BIN, REPO_ROOT, base_env, last_json_line

REPORT = (
    "import json, sys; print(json.dumps({'in_process': 'dpone_dagster.confinement.handover' in sys.modules, "
    "'argv': sys.argv[1:]}))"
)


def test_which_commands_run_in_this_interpreter(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("pass\n")
    assert in_process_target([sys.executable, "-m", "dagster", "asset"], None) == (
        "module",
        "dagster",
        ["dagster", "asset"],
    )
    assert in_process_target([sys.executable, str(script), "a"], None) == ("path", str(script), [str(script), "a"])
    assert in_process_target([str(BIN / "dbt"), "build"], None) == (
        "path",
        str(BIN / "dbt"),
        [str(BIN / "dbt"), "build"],
    )
    assert in_process_target([sys.executable, "-c", "pass"], None) is None
    assert in_process_target(["true"], None) is None
    assert in_process_target(["no-such-command-here"], None) is None


def _launch(command: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpone_dagster.confinement.launcher", "--", *command],
        env=base_env(tmp_path / "state"),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )


def test_a_script_runs_in_the_launchers_interpreter_with_its_own_argv_and_exit(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(REPORT + "\nsys.exit(3)\n")
    done = _launch([sys.executable, str(script), "x", "y"], tmp_path)
    assert done.returncode == 3, done.stderr
    assert last_json_line(done.stdout) == {"in_process": True, "argv": ["x", "y"]}


def test_anything_else_is_execed(tmp_path):
    done = _launch([sys.executable, "-c", REPORT, "z"], tmp_path)
    assert last_json_line(done.stdout) == {"in_process": False, "argv": ["z"]}
    missing = _launch(["no-such-command-here"], tmp_path)
    assert missing.returncode == 127 and "[confinement.command_not_found]" in missing.stderr


def test_with_another_thread_running_the_command_is_execed(tmp_path):
    """In-process would leave that thread unconfined beside the command: exec ends it instead."""
    script = tmp_path / "job.py"
    script.write_text(REPORT + "\n")
    caller = (
        "import os, sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "from dpone_dagster.confinement.handover import hand_over\n"
        f"hand_over([sys.executable, {str(script)!r}], dict(os.environ))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", caller], env=base_env(tmp_path / "state"), capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert last_json_line(done.stdout) == {"in_process": False, "argv": []}, done.stderr
