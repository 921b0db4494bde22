"""Ed25519 signature verification adapter (the `SignatureVerifier` port) over `cryptography`.

The one thing a reader could get wrong: a malformed key or signature is a *failed verification*
(False), never an exception that a caller might mistake for "could not check, carry on". A
small-order or non-canonical key is a failed verification too (`contracts.ed25519_keys`), even
though `cryptography` would accept it: policies refuse such keys, and this adapter does not trust
that every caller read its key through a policy.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from dpone_dagster.contracts.ed25519_keys import key_defect


class Ed25519SignatureVerifier:
    """Verifies raw 32-byte Ed25519 public keys and 64-byte signatures."""

    def verify(self, public_key: bytes, signature: bytes, message: bytes) -> bool:
        if len(public_key) != 32 or len(signature) != 64 or key_defect(public_key) is not None:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True
