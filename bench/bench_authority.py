"""Authority benchmarks: verification cost per grant, canonical JSON throughput vs json.dumps.

Every row compares against a baseline measured in the same run on the same machine, so the ratio is
meaningful where absolute seconds are not. `run()` returns rows
`{name, baseline_s, measured_s, ratio, goal}`; `make bench` prints them. The one thing a reader
could get wrong: the canonicalization baseline (`json.dumps(sort_keys=True)`) is *not* RFC 8785 (it
sorts by code point and formats floats differently); it is only the speed reference.
"""

from __future__ import annotations

import json

from bench.timing import best_seconds, ratio_row
from devtools.synthetic_documents import synthetic_documents
from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_source
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.canonical import dumps, loads_canonical
from dpone_dagster.contracts.grant import signing_payload


def _verification_rows() -> list[dict[str, object]]:
    authority = SyntheticAuthority(signer_count=3, threshold=2)
    grant_bytes, signatures = authority.signed()
    source = synthetic_source()
    verifier = authority.ports.signatures
    keys = [
        (bytes.fromhex(authority.policy.signer(s.key_id).public_key), bytes.fromhex(s.signature))
        for s in signatures.signatures
    ]
    payload = signing_payload(grant_bytes)

    def raw_signatures() -> None:
        for public_key, signature in keys:
            verifier.verify(public_key, signature, payload)

    def full_verification() -> None:
        verify_grant(
            grant_bytes, signatures, pinned_policy_digest=authority.policy_digest, source=source, ports=authority.ports
        )

    return [
        ratio_row(
            "verify_grant per grant (2-of-3 Ed25519) vs the 2 raw signature checks",
            best_seconds(raw_signatures, iterations=200),
            best_seconds(full_verification, iterations=200),
            "ratio <= 10 (parsing and policy checks cost less than 9 extra signature checks)",
        )
    ]


def _canonical_rows() -> list[dict[str, object]]:
    values = [json.loads(document.canonical_bytes()) for document in synthetic_documents().values()]
    encoded = [dumps(value) for value in values]
    total_bytes = sum(len(data) for data in encoded)

    def baseline_dump() -> None:
        for value in values:
            json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def canonical_dump() -> None:
        for value in values:
            dumps(value)

    def baseline_load() -> None:
        for data in encoded:
            json.loads(data)

    def canonical_load() -> None:
        for data in encoded:
            loads_canonical(data)

    return [
        ratio_row(
            f"canonical dumps of {len(values)} documents ({total_bytes} bytes) vs json.dumps(sort_keys=True)",
            best_seconds(baseline_dump, iterations=50),
            best_seconds(canonical_dump, iterations=50),
            "ratio <= 25 (pure-Python RFC 8785 vs the C encoder)",
        ),
        ratio_row(
            f"strict loads_canonical of {len(values)} documents vs json.loads",
            best_seconds(baseline_load, iterations=50),
            best_seconds(canonical_load, iterations=50),
            "ratio <= 40 (strict parse plus a canonical re-encode)",
        ),
    ]


def run() -> list[dict[str, object]]:
    return _verification_rows() + _canonical_rows()


if __name__ == "__main__":
    for row in run():
        print(
            (
                f"{row['ratio']:8.2f}x  {row['measured_s'] * 1e6:10.1f} us vs {row['baseline_s'] * 1e6:10.1f} us  "
                f"{row['name']}  [{row['goal']}]"
            )
        )
