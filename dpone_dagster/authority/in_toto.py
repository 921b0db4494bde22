"""Export an operation receipt as an in-toto Statement v1 (canonical JSON) for external audit.

The statement's subject is the release (its id is a `sha256:` digest, exported as the hex value);
the predicate is the receipt document itself plus its own digest. The one thing a reader could get
wrong: the subject digest is dpone's *domain-separated* release identity, not a SHA-256 of any file;
auditors must recompute it with `dpone_dagster.contracts.identity.digest`, not `sha256sum`.
"""

from __future__ import annotations

from dpone_dagster.contracts.canonical import dumps
from dpone_dagster.contracts.receipts import OperationReceipt

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE_PREFIX = "urn:dpone:"


def predicate_type(receipt: OperationReceipt) -> str:
    return PREDICATE_TYPE_PREFIX + receipt.KIND


def in_toto_statement(receipt: OperationReceipt) -> dict[str, object]:
    """The statement as a JSON value."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": f"dpone-release:{receipt.deployment_id}",
                "digest": {"sha256": receipt.release_id.removeprefix("sha256:")},
            }
        ],
        "predicateType": predicate_type(receipt),
        "predicate": {
            "receipt": receipt.model_dump(mode="json", by_alias=True),
            "receipt_digest": receipt.document_digest(),
        },
    }


def in_toto_statement_bytes(receipt: OperationReceipt) -> bytes:
    """The statement as RFC 8785 canonical bytes (ready to sign in a DSSE envelope)."""
    return dumps(in_toto_statement(receipt))
