"""Issue 18 "Done when": dpone-dagster adopted from its installed wheel by a small dbt-duckdb shop project.

In an empty folder holding only tests/fixtures/shop (a dg project + a dbt-duckdb project: seeds, staging
views, table marts, dbt tests), with the wheel in a fresh venv outside the repository:
`dpone init` -> `dg list defs` -> prod `dbt build` -> fork -> one model changed and built in the fork
(upstreams deferred) -> prod's catalog and data files byte-identical -> diff -> promote -> drop.
Every process's modules are checked through a sys.modules probe (nothing from the repository, nothing
of dbt_project_synthetic). Run for the highest (this venv) and lowest (tests/adoption/lowest-versions.txt)
supported dependency versions.

What a reader could get wrong: the lowest set needs its venv built once (`DPONE_LOWEST_VENV`, default
/tmp/dpone-deps-lowest); without it that parameter is skipped with the command that builds it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adoption.wheel_env import FORBIDDEN_SOURCES, REPO_ROOT, build_wheel, fresh_venv, probe_records

pytestmark = pytest.mark.slow
SHOP = REPO_ROOT / "tests" / "fixtures" / "shop"
FORK = "wm-fork-shop"
LOWEST_VENV = Path(os.environ.get("DPONE_LOWEST_VENV", "/tmp/dpone-deps-lowest"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def _deps_python(which: str) -> Path:
    if which == "highest":
        return Path(sys.executable)
    python = LOWEST_VENV / "bin" / "python"
    if not (LOWEST_VENV / ".dpone-deps-complete").is_file():
        pytest.skip(
            f"the lowest-versions venv is not built: python -m venv {LOWEST_VENV} && "
            f"pip install -r tests/adoption/lowest-versions.txt && touch {LOWEST_VENV}/.dpone-deps-complete"
        )
    return python


class Shop:
    def __init__(self, root: Path, bin_dir: Path, probe_dir: Path) -> None:
        self.root, self.bin, self.probe_dir = root, bin_dir, probe_dir

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_", "VIRTUAL_ENV"))}
        env.update(
            PATH=f"{self.bin}:/usr/bin:/bin",
            DPONE_IMPORT_PROBE_DIR=str(self.probe_dir),
            DPONE_IMPORT_PROBE_FORBIDDEN=os.pathsep.join(FORBIDDEN_SOURCES),
            PYTHONDONTWRITEBYTECODE="1",
            **extra,
        )
        return env

    def run(self, *args: str, cwd: Path | None = None, ok: bool = True, **env: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            cwd=cwd or self.root,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if ok:
            assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    def prod_files(self) -> dict[str, str]:
        lakes = self.root / ".dpone" / "lakes"
        files = [*lakes.glob("main.ducklake*"), *(p for p in (lakes / "storage" / "main").rglob("*") if p.is_file())]
        return {str(p.relative_to(lakes)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


@pytest.fixture(params=["highest", "lowest"])
def shop(request, wheel, tmp_path) -> Shop:
    bin_dir = fresh_venv(tmp_path / "venv", wheel, _deps_python(request.param))
    root = tmp_path / "empty" / "shop"
    shutil.copytree(SHOP, root)
    probe = tmp_path / "probe"
    probe.mkdir()
    return Shop(root, bin_dir, probe)


def test_the_shop_adopts_dpone_from_the_wheel(shop: Shop) -> None:
    import json

    dbt_dir = shop.root / "shop_dbt"
    assert "wrote 3 file(s)" in shop.run("dpone", "init").stdout
    assert "nothing to change" in shop.run("dpone", "init").stdout  # idempotent

    defs = json.loads(shop.run("dg", "list", "defs", "--json").stdout)
    assets = {a["asset_key"] for a in defs["assets"]}
    assert {"main/main/raw_orders", "main/main/stg_orders", "main/main/orders", "main/main/customers"} <= assets
    checks = {c.get("name") for c in defs["asset_checks"]}
    assert {"unique_orders_order_id", "fork_staleness", "diff_against_parent"} <= checks
    jobs = {j.get("name") for j in defs["jobs"]}
    assert {"drop_fork_job", "promote_fork_job", "fork_state_observation_job", "fork_janitor_job"} <= jobs
    assert "fork_state_sensor" in {s.get("name") for s in defs["sensors"]}

    shop.run("dbt", "build", "--profiles-dir", ".", cwd=dbt_dir)  # prod, from a subfolder of the project root
    assert not (dbt_dir / ".dpone").exists(), "a subfolder made its own prod"
    prod_before = shop.prod_files()
    assert prod_before and any(name.endswith(".parquet") for name in prod_before)
    listed_at_root = shop.run("dpone", "fork", "list").stdout

    shop.run("dpone", "fork", "create", FORK, "--parent", "prod")
    listed_below = shop.run("dpone", "fork", "list", cwd=dbt_dir / "models").stdout  # same control store
    assert FORK in listed_below and FORK not in listed_at_root
    orders = dbt_dir / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("<> 'returned'", "not in ('returned', 'placed')"))
    built = shop.run("dbt", "build", "--profiles-dir", ".", "-s", "orders", cwd=dbt_dir, ok=False, DPONE_WORKSPACE=FORK)
    assert built.returncode == 0, built.stdout[-3000:]
    assert shop.prod_files() == prod_before, "the fork's build changed prod's catalog or data files"

    assert "dpone: recorded 1 built" in built.stderr, built.stderr[-3000:]  # the terminal build is tracked

    diff = shop.run("dpone", "fork", "diff", FORK, "main.orders", "--json", ok=False, DPONE_WORKSPACE=FORK)
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr[-3000:]
    assert "orders" in diff.stdout
    assert shop.prod_files() == prod_before
    diff_id = json.loads(diff.stdout)["diff_id"]
    promoted = shop.run("dpone", "fork", "promote", FORK, "main.orders", "--diff-id", diff_id).stdout
    assert "promoted " in promoted and "orders" in promoted and f"diff {diff_id}" in promoted, promoted
    assert shop.prod_files() != prod_before  # now prod holds the fork's orders
    shop.run("dpone", "fork", "drop", FORK)
    assert FORK not in shop.run("dpone", "fork", "list").stdout.split()
    _require_no_repository_import(shop)  # every process above: dpone, dg, dbt


def _require_no_repository_import(shop: Shop) -> None:
    records = probe_records(shop.probe_dir)
    assert len(records) >= 3, records
    assert [r for r in records if r["bad"]] == []
    assert {r["dpone"] for r in records if r["dpone"]} and all(
        not r["dpone"].startswith(str(REPO_ROOT)) for r in records if r["dpone"]
    )


def test_no_process_imported_the_repository_or_the_synthetic_project(shop: Shop) -> None:
    shop.run("dpone", "init")
    shop.run("dg", "list", "defs", "--json")
    shop.run("dbt", "parse", "--profiles-dir", ".", cwd=shop.root / "shop_dbt")
    _require_no_repository_import(shop)


def test_dg_list_components_works_with_no_dpone_yaml_anywhere(shop: Shop, tmp_path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(SHOP, bare)  # a dg project that was never `dpone init`ed
    done = shop.run("dg", "list", "components", "--json", cwd=bare)
    assert "ForkAwareDbtProjectComponent" in done.stdout
    assert not any(p.name == "dpone.yaml" for p in bare.rglob("*"))
    assert [r for r in probe_records(shop.probe_dir) if r["bad"]] == []
