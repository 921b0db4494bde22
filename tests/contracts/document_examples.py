"""Golden-vector writer over the synthetic documents.

Run `cd tests && ../.venv/bin/python -m contracts.document_examples --write` to regenerate
`tests/contracts/vectors/` after an *intended* contract change; review the diff: every changed
digest is a changed persisted identity.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from devtools.synthetic_documents import synthetic_documents

VECTORS = Path(__file__).parent / "vectors"


def examples():
    return synthetic_documents()


def write_vectors() -> None:
    VECTORS.mkdir(exist_ok=True)
    digests = {}
    for stem, document in examples().items():
        (VECTORS / f"{stem}.json").write_bytes(document.canonical_bytes())
        digests[stem] = document.document_digest()
    (VECTORS / "digests.json").write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m contracts.document_examples --write")
    write_vectors()
