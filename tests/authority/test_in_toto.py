"""in-toto Statement export of operation receipts."""

from __future__ import annotations

import json

import pytest

from devtools.synthetic_documents import synthetic_documents as examples
from dpone_dagster.authority.in_toto import STATEMENT_TYPE, in_toto_statement_bytes
from dpone_dagster.contracts.canonical import loads_canonical
from dpone_dagster.contracts.dispatch import read_document

RECEIPTS = ["dpone.publication-receipt.v1", "dpone.materialization-receipt.v1", "dpone.activation-receipt.v1"]


@pytest.mark.parametrize("stem", RECEIPTS)
def test_statement_binds_release_and_embeds_the_exact_receipt(stem: str) -> None:
    receipt = examples()[stem]
    data = in_toto_statement_bytes(receipt)
    statement = loads_canonical(data)
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["subject"][0]["digest"]["sha256"] == receipt.release_id.removeprefix("sha256:")
    assert statement["predicateType"] == f"urn:dpone:{stem}"
    embedded = json.dumps(statement["predicate"]["receipt"], separators=(",", ":"), sort_keys=True).encode()
    assert read_document(embedded) == receipt
    assert statement["predicate"]["receipt_digest"] == receipt.document_digest()


def test_statements_of_different_kinds_differ() -> None:
    all_examples = examples()
    statements = {in_toto_statement_bytes(all_examples[stem]) for stem in RECEIPTS}
    assert len(statements) == 3
