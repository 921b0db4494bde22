"""How `make test` splits the suite between xdist workers (tests/conftest.py).

What a reader could get wrong: the order only matters under xdist (`--dist loadgroup`, where the
controller hands groups out in collection order); a plain `pytest` run keeps the collection order.
"""

from __future__ import annotations

from tests.conftest import group_of, longest_groups_first


def test_an_expensive_session_fixture_groups_tests_across_files_and_other_files_are_their_own_group():
    assert group_of("tests/ui/test_fork_flow.py::test_a", ["tmp_path", "webserver"]) == "webserver"
    assert group_of("tests/ui/test_fork_flow.py::test_b", ["tmp_path"]) == "ui/test_fork_flow.py"
    assert group_of("tests/lake/test_x.py::test_c[pg]", ["built_prod_lake", "released"]) == "released"


def test_the_partition_scenario_on_each_backend_is_its_own_group():
    one = group_of("tests/dbt/test_partition_dbt.py::test_per_partition_defer_on_the_embedded_lake", ["tmp_path"])
    two = group_of("tests/dbt/test_partition_dbt.py::test_per_partition_defer_on_postgres_and_s3", ["tmp_path"])
    assert one != two and {one, two} <= {
        "dbt/test_partition_dbt.py::test_per_partition_defer_on_the_embedded_lake",
        "dbt/test_partition_dbt.py::test_per_partition_defer_on_postgres_and_s3",
    }


def test_the_longest_groups_go_first_and_each_group_keeps_its_order():
    pairs = [
        ("s1", "a.py"),
        ("s2", "a.py"),
        ("s3", "a.py"),
        ("w1", "webserver"),
        ("c", "scale/test_concurrency.py"),
        ("w2", "webserver"),
        ("b1", "b.py"),
    ]
    assert [item for item, _ in longest_groups_first(pairs)] == ["w1", "w2", "c", "s1", "s2", "s3", "b1"]


def test_under_xdist_loadgroup_each_group_runs_on_one_worker(tmp_path):
    """Two files of three tests on two workers: each file's tests share one worker (red if the `@group` is lost)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), tests / "conftest.py")
    body = "import os\n" + "".join(
        f"def test_{i}():\n    print('WORKER', os.environ['PYTEST_XDIST_WORKER'])\n" for i in range(3)
    )
    for name in ("test_a.py", "test_b.py"):
        (tests / name).write_text(body, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            "-rA",
            "tests",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    workers: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("[gw") and "PASSED" in line:
            workers.setdefault(line.split("PASSED ")[1].split("::")[0], set()).add(line.split("]")[0])
    assert set(workers) == {"tests/test_a.py", "tests/test_b.py"}
    assert all(len(found) == 1 for found in workers.values()), workers
