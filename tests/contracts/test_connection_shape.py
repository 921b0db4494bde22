"""Issue 20 item 2: a connection projection is a closed shape, not a denylist.

Only the binding-shape parameters of `CONNECTION_PARAMETERS` may appear, each with a value of its own
bounded form; every other parameter, secret-looking or not, is refused with its code, in an authored
`flow.yaml` (capture) and in a committed `pack.json` (a hand-edited pack) alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dpone_dagster.contracts.flows import CONNECTION_PARAMETERS, ConnectionDeclaration, ConnectionParameter, FlowError
from dpone_dagster.release.build.flows import capture_ordinary
from dpone_dagster.release.build.packs import parse_manifest
from dpone_dagster.release.source.snapshot import open_source

SYNTHETIC_FLOWS = Path(__file__).resolve().parents[2] / "dbt_project_synthetic" / "flows"
MANIFEST = (SYNTHETIC_FLOWS / "orders_snapshot" / "flow.yaml").read_text()
CEILING = type("Ceiling", (), {"max_cpu_millicores": 2_000, "max_memory_bytes": 4 * 2**30})()

# What the issue found accepted by the denylist (each went into the release identity).
ISSUE_PARAMETERS = {
    "pw": "hunter2",
    "login": "admin:hunter2",
    "key": "S3cr3tK3y-2024",
    "pin": "4711",
    "client_cert_b64": "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA",
    "pwd_file": "/run/secrets/db",
}
ALLOWED = {
    "schema": "raw",
    "database": "analytics",
    "catalog": "flow_lake",
    "role": "reporting_reader",
    "region": "eu-central-1",
    "bucket": "synthetic-flows.example",
    "prefix": "lake/flow_marts/",
}
INVALID_VALUES = {
    "schema": "raw.other",
    "role": "admin:hunter2",
    "database": "postgres://db.example.invalid/x",
    "region": "eu-central-1/../../x",
    "bucket": "UPPER",
    "prefix": "../escape",
}


def _manifest(name: str, value: str) -> bytes:
    return MANIFEST.replace("parameters: {schema: raw}", f"parameters: {{schema: raw, {name}: {value!r}}}", 1).encode()


def _code(call) -> str:
    with pytest.raises(FlowError) as raised:
        call()
    return raised.value.code


@pytest.mark.parametrize("name", sorted(ISSUE_PARAMETERS))
def test_each_parameter_the_denylist_let_through_is_refused(name) -> None:
    code = _code(lambda: parse_manifest(_manifest(name, ISSUE_PARAMETERS[name]), "flows/orders_snapshot/flow.yaml"))
    assert code in {"flows.connection_parameter_not_allowed", "flows.connection_credential"}


@pytest.mark.parametrize("name", sorted(ISSUE_PARAMETERS))
def test_the_closed_shape_alone_refuses_them(name) -> None:
    """The model check itself, without the raw-YAML denylist in front of it."""
    raw = {
        "alias": "orders_source",
        "conn_type": "ducklake",
        "access": "read",
        "parameters": {name: ISSUE_PARAMETERS[name]},
    }
    assert _code(lambda: ConnectionDeclaration.from_value(raw)) == "flows.connection_parameter_not_allowed"
    assert (
        _code(lambda: ConnectionParameter(name=name, value=ISSUE_PARAMETERS[name]))
        == "flows.connection_parameter_not_allowed"
    )


@pytest.mark.parametrize("name", sorted(INVALID_VALUES))
def test_an_allowed_parameter_with_an_unbounded_value_is_refused(name) -> None:
    assert (
        _code(lambda: ConnectionParameter(name=name, value=INVALID_VALUES[name]))
        == "flows.connection_parameter_invalid"
    )


def test_the_allowlist_is_exactly_the_binding_shape() -> None:
    assert set(CONNECTION_PARAMETERS) == set(ALLOWED)
    for name, value in ALLOWED.items():
        assert ConnectionParameter(name=name, value=value).value == value
        assert parse_manifest(_manifest(name, value) if name != "schema" else MANIFEST.encode(), "flow.yaml")


def test_capture_refuses_the_parameter_and_never_echoes_its_value(tmp_path) -> None:
    root = tmp_path / "source"
    for path in SYNTHETIC_FLOWS.rglob("*"):
        if path.is_file():
            target = root / "flows" / path.relative_to(SYNTHETIC_FLOWS)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (root / "flows" / "orders_snapshot" / "flow.yaml").write_bytes(_manifest("pw", "hunter2"))
    (tmp_path / "work").mkdir()
    with open_source(root, work_dir=tmp_path / "work") as tree, pytest.raises(FlowError) as raised:
        capture_ordinary(tree, resource_ceiling=CEILING)
    assert raised.value.code == "flows.connection_parameter_not_allowed"
    assert "hunter2" not in str(raised.value)
