"""Closed, strict, bounded models: the invariants each document enforces on its own."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone_dagster.authority.synthetic import SyntheticAuthority, SyntheticSigner, synthetic_policy
from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.bounds import MAX_WORKLOADS, format_timestamp, parse_timestamp
from dpone_dagster.contracts.grant import DevelopmentGrant, ExecutionSubject
from dpone_dagster.contracts.policy import DeliveryLimits, SignerKey, signer_key_id

AUTHORITY = SyntheticAuthority()


def _grant_value(**overrides) -> dict:
    value = AUTHORITY.grant().model_dump(mode="json", by_alias=True)
    value.update(overrides)
    return value


@pytest.mark.parametrize(
    "override",
    [
        {"max_workloads": 10.0},  # a float where the model has none
        {"revocation_epoch": True},  # a bool is not an integer
        {"sequence": "1"},  # nor is a string
        {"sequence": 0},
        {"max_workloads": MAX_WORKLOADS + 1},
        {"source_commit": "ABCDEF0123456789abcdef0123456789abcdef01"},
        {"source_commit": "abc"},
        {"not_before": "2026-02-30T00:00:00Z"},
        {"not_before": "2026-01-05T09:00:00+00:00"},
        {"expires_at": "2026-01-05T09:00:00Z"},  # not after not_before
        {"native_membership": ["model.b", "model.a"]},  # unsorted
        {"native_membership": ["model.a", "model.a"]},  # repeated
        {"native_membership": [], "ordinary_membership": [], "execution_subjects": []},
        {"ordinary_membership": ["model.synthetic_shop.orders"]},  # both native and ordinary
        {"execution_subjects": [{"workload": "not_a_member", "kind": "runtime", "hook_id": None}]},
        {"purpose": "execution"},
        {"trust_tier": "production"},
        {"environment": "Synthetic Dev"},
    ],
)
def test_grant_invariants(override: dict) -> None:
    with pytest.raises(ContractError) as caught:
        DevelopmentGrant.from_value(_grant_value(**override))
    assert caught.value.code in {"contract.invalid", "contract.schema_mismatch"}


@pytest.mark.parametrize(
    ("kind", "hook_id"),
    [("pre_hook", None), ("runtime", "create_staging")],
)
def test_execution_subject_hook_rules(kind: str, hook_id: str | None) -> None:
    with pytest.raises(ContractError):
        ExecutionSubject(workload="synthetic_transfer", kind=kind, hook_id=hook_id)


def test_policy_threshold_cannot_exceed_signers() -> None:
    signers = [SyntheticSigner("a"), SyntheticSigner("b")]
    with pytest.raises(ContractError):
        synthetic_policy(signers, 3)
    assert synthetic_policy(signers, 2).threshold == 2


def test_signer_key_id_must_be_derived_from_the_key() -> None:
    signer = SyntheticSigner("a")
    with pytest.raises(ContractError):
        SignerKey(
            key_id=signer_key_id(SyntheticSigner("b").public_key_hex),
            algorithm="ed25519",
            public_key=signer.public_key_hex,
        )


def test_models_are_frozen() -> None:
    grant = AUTHORITY.grant()
    with pytest.raises(Exception):
        grant.sequence = 2  # type: ignore[misc]


def test_timestamps_round_trip() -> None:
    moment = parse_timestamp("2026-12-31T23:59:59Z")
    assert format_timestamp(moment) == "2026-12-31T23:59:59Z"


_limits = st.builds(
    DeliveryLimits,
    max_workloads=st.integers(1, MAX_WORKLOADS),
    max_source_bytes=st.integers(1, 2**40),
    max_cpu_millicores=st.integers(1, 10**6),
    max_memory_bytes=st.integers(1, 2**45),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_limits, min_size=1, max_size=4))
def test_tightest_limits_are_fieldwise_minimum_and_never_loosen(limits: list[DeliveryLimits]) -> None:
    tightest = DeliveryLimits.tightest(*limits)
    for name in DeliveryLimits.model_fields:
        assert getattr(tightest, name) == min(getattr(item, name) for item in limits)
        assert all(getattr(tightest, name) <= getattr(item, name) for item in limits)
