"""Canonical JSON: RFC 8785 (JSON Canonicalization Scheme) writer and a strict reader.

Every identity and every signature in dpone-dagster is computed over the bytes `dumps` produces, so
this module's output must never change. `dumps` follows RFC 8785 exactly: object members sorted by
their UTF-16 code units, no insignificant whitespace, strings escaped as ECMAScript's
`JSON.stringify` does, and numbers printed with ECMAScript's `Number.prototype.toString` algorithm.

`loads` is deliberately stricter than the `json` module: duplicate member names, NaN/Infinity, a
byte-order mark, invalid UTF-8, lone surrogates, numbers that overflow a double, and input beyond
fixed size and nesting bounds all raise `CanonicalError`. Integer literals beyond 2^53 are read as
doubles (RFC 8785 numbers are IEEE-754); `dumps` refuses Python ints beyond 2^53 rather than round
them. The one thing a reader could get wrong: `loads` alone accepts *any* valid JSON text, including
non-canonical spellings (`1.0`, whitespace, unsorted keys). Identity-bearing readers must call
`loads_canonical`, which also requires the input to be byte-for-byte the canonical form of what it
parses to.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from json.encoder import encode_basestring

from dpone_dagster.contracts.coded import CodedError

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_SAFE_INTEGER = 2**53 - 1

_UTF8_BOM = b"\xef\xbb\xbf"
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class CanonicalError(CodedError):
    """Input or a value cannot be (or is not) canonical JSON. `code` names the exact reason."""

    codes = {
        "canonical.invalid_utf8": "The document bytes are not valid UTF-8. It was corrupted or not produced by dpone.",
        "canonical.bom": "The document starts with a byte-order mark. Canonical documents never do; re-export it.",
        "canonical.too_large": "The document exceeds the fixed size bound and was not parsed.",
        "canonical.too_deep": "The document nests deeper than the fixed bound and was not parsed.",
        "canonical.invalid_json": "The bytes are not exactly one JSON text.",
        "canonical.duplicate_key": "An object repeats a member name; the document is ambiguous and refused.",
        "canonical.non_finite_number": "The document contains NaN or Infinity, which have no JSON form.",
        "canonical.number_out_of_range": "A number cannot be represented exactly; integers must stay within 2^53-1.",
        "canonical.invalid_string": "A string contains a lone UTF-16 surrogate.",
        "canonical.unsupported_type": "A value of a type JSON cannot express was given (a programming error).",
        "canonical.non_canonical": (
            "The JSON is valid but not RFC 8785 canonical; identities are only taken over canonical bytes."
        ),
    }


def dumps(obj: object) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON value built from dict/list/str/int/float/bool/None."""
    parts: list[str] = []
    _write(obj, parts, 0)
    text = "".join(parts)
    data = text.encode("utf-8")
    if len(data) > MAX_DOCUMENT_BYTES:
        raise CanonicalError("canonical.too_large", f"canonical form exceeds {MAX_DOCUMENT_BYTES} bytes")
    return data


def loads(data: bytes) -> object:
    """Parse one JSON text strictly. Accepts non-canonical spellings; see `loads_canonical`."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CanonicalError("canonical.unsupported_type", "canonical input must be bytes")
    data = bytes(data)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise CanonicalError("canonical.too_large", f"input exceeds {MAX_DOCUMENT_BYTES} bytes")
    if data.startswith(_UTF8_BOM):
        raise CanonicalError("canonical.bom", "input starts with a byte-order mark")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise CanonicalError("canonical.invalid_utf8", "input is not valid UTF-8") from None
    _check_depth(text)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicate_keys,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except CanonicalError:
        raise
    except (ValueError, RecursionError):
        raise CanonicalError("canonical.invalid_json", "input is not a single valid JSON text") from None
    _reject_lone_surrogates(value)
    return value


def loads_canonical(data: bytes) -> object:
    """Parse strictly and require `data` to be exactly the canonical bytes of the parsed value."""
    value = loads(data)
    if dumps(value) != bytes(data):
        raise CanonicalError("canonical.non_canonical", "input is valid JSON but not in RFC 8785 canonical form")
    return value


def format_number(value: int | float) -> str:
    """ECMAScript Number.prototype.toString for a finite number in the IEEE-754 double range."""
    if isinstance(value, bool):
        raise CanonicalError("canonical.unsupported_type", "a boolean is not a number")
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalError("canonical.number_out_of_range", "integer outside the IEEE-754 safe range (±2^53-1)")
        return str(value)
    if not math.isfinite(value):
        raise CanonicalError("canonical.non_finite_number", "NaN and Infinity have no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr() yields the shortest digit string that round-trips, which is what ECMAScript requires.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    k = len(digits)
    n = exponent + k
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        mantissa = digits[0] if k == 1 else digits[0] + "." + digits[1:]
        e = n - 1
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def _write(obj: object, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CanonicalError("canonical.too_deep", f"value nests deeper than {MAX_DEPTH} levels")
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(_string(obj))
    elif isinstance(obj, (int, float)):
        out.append(format_number(obj))
    elif isinstance(obj, Mapping):
        for key in obj:
            if not isinstance(key, str):
                raise CanonicalError("canonical.unsupported_type", "object member names must be strings")
        out.append("{")
        for index, key in enumerate(sorted(obj, key=_utf16_order)):
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(obj[key], out, depth + 1)
        out.append("}")
    elif isinstance(obj, Sequence) and not isinstance(obj, (bytes, bytearray)):
        out.append("[")
        for index, item in enumerate(obj):
            if index:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    else:
        raise CanonicalError("canonical.unsupported_type", f"{type(obj).__name__} has no canonical JSON form")


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", errors="surrogatepass")


def _string(value: str) -> str:
    if _LONE_SURROGATE.search(value):
        raise CanonicalError("canonical.invalid_string", "string contains a lone UTF-16 surrogate")
    # json.dumps(ensure_ascii=False) escapes exactly what JSON.stringify escapes: '"', '\\',
    # \b \t \n \f \r, and other C0 controls as lowercase \u00xx. `encode_basestring` is the
    # function it calls for a str (the C one), without building an encoder per string (~40x faster).
    return encode_basestring(value)


def _check_depth(text: str) -> None:
    depth = 0
    for match in _BRACKET.finditer(_STRING_LITERAL.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise CanonicalError("canonical.too_deep", f"input nests deeper than {MAX_DEPTH} levels")
        else:
            depth -= 1


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise CanonicalError("canonical.duplicate_key", "an object repeats a member name")
        result[key] = value
    return result


def _reject_constant(name: str) -> object:
    raise CanonicalError("canonical.non_finite_number", f"{name} is not valid JSON")


def _parse_int(text: str) -> int | float:
    value = int(text)
    if abs(value) > MAX_SAFE_INTEGER:
        # RFC 8785 numbers are IEEE-754 doubles; an integer literal beyond 2^53 is read as one.
        return _parse_float(text)
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise CanonicalError("canonical.number_out_of_range", "number overflows an IEEE-754 double")
    return value


def _reject_lone_surrogates(value: object) -> None:
    if isinstance(value, str):
        if _LONE_SURROGATE.search(value):
            raise CanonicalError("canonical.invalid_string", "string contains a lone UTF-16 surrogate")
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_lone_surrogates(key)
            _reject_lone_surrogates(item)
    elif isinstance(value, list):
        for item in value:
            _reject_lone_surrogates(item)
