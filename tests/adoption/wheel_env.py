"""A fresh venv outside the repository holding only the built dpone-dagster wheel (for the slow adoption tests).

`build_wheel` builds from a copy of the package sources (the shared working tree gets no build/ or
egg-info); `fresh_venv` installs that wheel with `--no-deps --no-index` and borrows the dependencies
of an existing venv through a `.pth` line, so it is offline and takes seconds. A `sitecustomize`
probe in the fresh venv records, at every process exit, each loaded module that comes from the
repository's own sources (`FORBIDDEN_SOURCES`; the borrowed `.venv` inside it is allowed) or names
`dbt_project_synthetic`.

What a reader could get wrong: a `.pth` line only appends a folder to `sys.path`; the `.pth` files
inside the borrowed site-packages (the repository's editable install) are not run, so
`dpone_dagster` resolves to the wheel. Console scripts of the borrowed packages are written anew
for the fresh interpreter (theirs name the other venv's python).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_SOURCES = tuple(
    str(REPO_ROOT / name) for name in ("dpone_dagster", "dbt_project_synthetic", "devtools", "tests", "bench")
)
SCRIPT_DISTS = ("dagster", "dagster-dg-cli", "dbt-core", "dagster-webserver", "dagster-graphql")

PROBE = """
import atexit, json, os, sys
def _dpone_probe():
    out = os.environ.get("DPONE_IMPORT_PROBE_DIR")
    if not out:
        return
    forbidden = tuple(p + os.sep for p in os.environ.get("DPONE_IMPORT_PROBE_FORBIDDEN", "").split(os.pathsep) if p)
    bad = sorted(
        name for name, mod in list(sys.modules.items())
        if "dbt_project_synthetic" in name
        or (forbidden and str(getattr(mod, "__file__", "") or "").startswith(forbidden))
        or "dbt_project_synthetic" in str(getattr(mod, "__file__", "") or "")
    )
    dpone = sys.modules.get("dpone_dagster")
    record = {"argv": sys.argv[:3], "bad": bad, "dpone": getattr(dpone, "__file__", None)}
    with open(os.path.join(out, f"{os.getpid()}.json"), "w") as handle:
        json.dump(record, handle)
atexit.register(_dpone_probe)
"""

SCRIPTS = """
import os, sys
from importlib.metadata import distribution
for dist in {dists!r}:
    for ep in distribution(dist).entry_points.select(group="console_scripts"):
        module, _, attr = ep.value.partition(":")
        path = os.path.join(os.path.dirname(sys.executable), ep.name)
        with open(path, "w") as handle:
            handle.write(
                f"#!{{sys.executable}}\\nimport sys\\n"
                f"from {{module}} import {{attr.split('.')[0]}}\\nsys.exit({{attr}}())\\n"
            )
        os.chmod(path, 0o755)
"""


def build_wheel(out: Path) -> Path:
    source = out / "src"
    shutil.copytree(REPO_ROOT / "dpone_dagster", source / "dpone_dagster", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = out.glob("dpone_dagster-*.whl")
    return wheel


def site_packages(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(done.stdout.strip())


def fresh_venv(where: Path, wheel: Path, deps_python: Path) -> Path:
    """A venv at `where` with the wheel installed and `deps_python`'s packages borrowed; returns its bin/."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    own = site_packages(python)
    (own / "zz_dpone_borrowed_deps.pth").write_text(f"{site_packages(deps_python)}\n")
    (own / "sitecustomize.py").write_text(PROBE)
    subprocess.run([str(python), "-c", SCRIPTS.format(dists=SCRIPT_DISTS)], check=True)
    return where / "bin"


def probe_records(probe_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(probe_dir.glob("*.json"))]
