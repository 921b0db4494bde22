"""Which 32-byte strings may be a policy's Ed25519 signer key: canonical encodings of points outside
the small-order subgroup, checked on the bytes themselves.

`cryptography` (OpenSSL) accepts a small-order public key, and for such a key one signature
verifies over every message, so a policy listing one would let a universal forgery count toward
its k-of-n threshold. It also accepts some non-canonical encodings (y >= p, or "negative zero"
x), which give one key two spellings and two `key_id`s. `key_defect(public_key)` decodes the
point with plain integer arithmetic on edwards25519 (RFC 8032, section 5.1.3) and answers:

- `"non_canonical"`: y is not reduced below p = 2^255 - 19, or x = 0 with the sign bit set;
- `"not_on_curve"`: no x satisfies the curve equation for y;
- `"small_order"`: [8]P is the identity (the 8 points of order 1, 2, 4 and 8);
- `None`: a usable key.

The one thing a reader could get wrong: this is not a prime-order (torsion-free) check. A key with
a small-order component added to a prime-order point is not refused here; it cannot forge without
its private key, and refusing it would cost a full scalar multiplication per key.
"""

from __future__ import annotations

from typing import Literal

P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)
KeyDefect = Literal["non_canonical", "not_on_curve", "small_order"]
Point = tuple[int, int]
IDENTITY: Point = (0, 1)


def key_defect(public_key: bytes) -> KeyDefect | None:
    """Why `public_key` must not be a signer key, or None when it may be."""
    if len(public_key) != 32:
        return "non_canonical"
    encoded = int.from_bytes(public_key, "little")
    y, sign = encoded & ((1 << 255) - 1), encoded >> 255
    if y >= P:
        return "non_canonical"
    x = _recover_x(y)
    if x is None:
        return "not_on_curve"
    if x == 0 and sign:
        return "non_canonical"
    point = (x if (x & 1) == sign else P - x, y)
    for _ in range(3):
        point = _add(point, point)
    return "small_order" if point == IDENTITY else None


def _recover_x(y: int) -> int | None:
    """The even-or-odd x with -x^2 + y^2 = 1 + d x^2 y^2, or None when there is none."""
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    return x


def _add(a: Point, b: Point) -> Point:
    """Affine point addition on edwards25519 (complete: defined for every pair of curve points)."""
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + y1 * x2) * pow(1 + t, P - 2, P) % P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P
    return x3, y3
