"""Receipt seals: a receipt proves it was issued by this process, not built by hand or altered.

`verify_grant` seals the `DevelopmentAuthorityReceipt` it returns, and `ReceiptIssuer` seals every
operation receipt it issues: an HMAC-SHA256 over the receipt's identity kind and canonical bytes,
kept on the receipt object in memory (`SealedReceipt._seal`), never in its bytes, identity or
audit trail. Every protected use checks the seal first (`is_sealed`); a receipt constructed
directly, parsed from a file, copied from another process, or copied with one field changed
(`model_copy(update=...)` keeps the old seal, which no longer matches) is refused.

Where the key lives: `PROCESS_SEAL` holds 32 bytes from the operating system's CSPRNG, drawn when
this module is first imported, in the memory of that process only. It is never written to disk,
the environment, the control store, a log or a Dagster event, on the embedded default and on a
configured platform alike. So a receipt is valid only inside the process that verified the grant
and issued it, for at most its lifetime (one hour by default): the release stages and operator
commands verify and issue in the process that then performs the operation (the release stages run
in process for this reason), and a restarted or other process must verify the grant again. A
platform that needs receipts to cross processes must replace this with a signature under a key its
KMS holds; nothing here offers that.

The one thing a reader could get wrong: the seal authenticates the *issuer*, not the contents'
correctness, and it is no defence against code running inside the issuing process (which could
call `seal` itself). Its job is to make hand-built, re-dated and re-targeted receipts from outside
the issuing path fail closed; every field is still checked at each use.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import TypeVar

from dpone_dagster.contracts.receipts import SealedReceipt

SEAL_DOMAIN = b"dpone.receipt-seal.v1\x00"
KEY_BYTES = 32

R = TypeVar("R", bound=SealedReceipt)


class ReceiptSeal:
    """Seals receipts with one secret key and recognizes its own seals (constant-time comparison)."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) < KEY_BYTES:
            raise ValueError(f"a receipt seal key must be at least {KEY_BYTES} bytes")
        self._key = key

    def seal(self, receipt: R) -> R:
        """Attach this process's seal to `receipt` (an issuer does this once, as it issues)."""
        receipt._seal = self._mac(receipt)
        return receipt

    def is_sealed(self, receipt: object) -> bool:
        """True only for a receipt this seal sealed whose bytes have not changed since."""
        if not isinstance(receipt, SealedReceipt):
            return False
        seal = receipt._seal
        return isinstance(seal, bytes) and hmac.compare_digest(seal, self._mac(receipt))

    def _mac(self, receipt: SealedReceipt) -> bytes:
        body = SEAL_DOMAIN + receipt.identity_kind().encode("ascii") + b"\x00" + receipt.canonical_bytes()
        return hmac.new(self._key, body, hashlib.sha256).digest()


PROCESS_SEAL = ReceiptSeal(secrets.token_bytes(KEY_BYTES))
"""The seal of this process: every verifier and issuer in it uses this one key (see the module docstring)."""
