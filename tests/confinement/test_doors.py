"""Issue 19's file doors, from a process acting for a fork on the embedded default: the kernel refuses.

One confined process (the launcher, then `sql_doors.py`) attaches the fork's lake to a raw DuckDB
connection (no SQL guard: a door the guard missed) and tries each door; after every door prod's
catalog and data files (names and sha256) must be what they were. The fork's own writes (a table
in its namespace, a temp file) still work. With `DPONE_TEST_CONFINEMENT=off` the same process runs
unconfined and these tests go red: the doors are real on DuckLake 1.5.5.
"""

from __future__ import annotations

import sys

import pytest

from .harness import FORK, build_forked_state, last_json_line, needs_landlock, run_for_fork

pytestmark = needs_landlock

DOORS = (
    "1_copy_over_prod_data_file",
    "2_copy_over_prod_catalog",
    "3_own_cleanup_list_names_prod_file",
    "4_write_parquet_on_relation",
    "7_copy_new_file_into_prod_folder",
    "7_export_database_into_prod_folder",
    "python_remove_prod_data_file",
    "python_overwrite_prod_catalog",
    "thread_after_confinement_writes_prod_file",
)
REFUSED_WITHOUT_ERROR = {"3_own_cleanup_list_names_prod_file"}
"""DuckLake's cleanup skips a file it cannot delete without failing the call: prod's bytes decide."""


@pytest.fixture(scope="module")
def doors_run(tmp_path_factory):
    forked = build_forked_state(tmp_path_factory.mktemp("doors") / "state")
    before = forked.fingerprint()
    done = run_for_fork(
        [sys.executable, "tests/confinement/sql_doors.py", str(forked.prod_catalog), str(forked.prod_data)],
        forked.env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return forked, before, last_json_line(done.stdout)


@pytest.mark.parametrize("door", DOORS)
def test_a_door_to_the_parents_files_is_refused_by_the_kernel(doors_run, door):
    _, before, report = doors_run
    outcome = report["doors"][door]
    assert outcome["prod"] == before, f"{door} changed prod's files"
    if door not in REFUSED_WITHOUT_ERROR:
        assert outcome["error"] and "Permission denied" in outcome["error"], outcome["error"]


def test_the_forks_own_writes_still_work_and_prod_ends_byte_identical(doors_run):
    forked, before, report = doors_run
    assert report["workspace"] == FORK
    assert report["own_rows"] == 3
    assert report["temp_write"] == "temp files still work"
    assert forked.fingerprint() == before
