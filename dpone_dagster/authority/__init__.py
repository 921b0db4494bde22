"""Development authority: verify a pinned policy and a threshold-signed grant, admit target operations.

Start at `verification` (`verify_policy`, `verify_grant` -> `DevelopmentAuthorityReceipt`) and
`target_admission` (`ReceiptIssuer`); both seal what they hand out with this process's key
(`receipt_seal`), so only receipts issued here, unaltered, are accepted. The one thing a reader
could get wrong: nothing in this package reads files, flags or the environment; authority enters
only through injected ports (the seal key is drawn in memory, never read), and `synthetic` is for
tests and the demo only.
"""
