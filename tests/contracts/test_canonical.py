"""RFC 8785 conformance and strictness of the canonical JSON reader/writer."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone_dagster.contracts import canonical
from dpone_dagster.contracts.canonical import CanonicalError, dumps, format_number, loads, loads_canonical

# RFC 8785 Appendix B: IEEE-754 bit patterns and their required ECMAScript serialization.
RFC8785_NUMBER_VECTORS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), RFC8785_NUMBER_VECTORS)
def test_rfc8785_number_serialization(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert format_number(value) == expected
    assert dumps([value]) == f"[{expected}]".encode()


def test_rfc8785_section_3_2_2_example() -> None:
    source = (
        b'{\n  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n'
        b'  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        b'  "literals": [null, true, false]\n}'
    )
    expected = (
        b'{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        b'"string":"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert dumps(loads(source)) == expected
    assert loads_canonical(expected) == loads(source)


def test_rfc8785_section_3_2_3_utf16_member_order() -> None:
    source = (
        '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",'
        '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control",'
        '"\\u00f6":"Latin Small Letter O With Diaeresis"}'
    ).encode()
    order = [json.loads(json.dumps(k)) for k in loads(dumps(loads(source)))]
    assert [v for v in (loads(source)[k] for k in order)] == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]
    # Code-point order would put U+FB33 before U+1F600; UTF-16 order must not.
    assert dumps({"\ufb33": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\ufb33":1}'.encode()


def test_control_characters_use_lowercase_short_escapes() -> None:
    assert dumps("\b\t\n\f\r\x00\x1f\x7f") == b'"\\b\\t\\n\\f\\r\\u0000\\u001f\x7f"'


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"a":1,"a":2}', "canonical.duplicate_key"),
        (b"[NaN]", "canonical.non_finite_number"),
        (b"[-Infinity]", "canonical.non_finite_number"),
        (b"[1e400]", "canonical.number_out_of_range"),
        (b"[1" + b"0" * 400 + b"]", "canonical.number_out_of_range"),
        (b"\xef\xbb\xbf{}", "canonical.bom"),
        (b'["\xff"]', "canonical.invalid_utf8"),
        (b'["\\ud800"]', "canonical.invalid_string"),
        (b'{"a":1', "canonical.invalid_json"),
        (b"{} {}", "canonical.invalid_json"),
        (b"[" * (canonical.MAX_DEPTH + 1) + b"]" * (canonical.MAX_DEPTH + 1), "canonical.too_deep"),
        (b" " * (canonical.MAX_DOCUMENT_BYTES + 1), "canonical.too_large"),
    ],
)
def test_strict_reader_rejects(data: bytes, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        loads(data)
    assert caught.value.code == code


def test_brackets_inside_strings_do_not_count_towards_depth() -> None:
    text = b'["' + b"[" * 100 + b'"]'
    assert loads(text) == ["[" * 100]


@pytest.mark.parametrize("data", [b'{"b":1,"a":2}', b"[1.0]", b"[ 1]", b'{"a":-0}', b'["\\u0041"]', b"[1E2]"])
def test_loads_canonical_rejects_non_canonical_spellings(data: bytes) -> None:
    loads(data)
    with pytest.raises(CanonicalError) as caught:
        loads_canonical(data)
    assert caught.value.code == "canonical.non_canonical"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (float("nan"), "canonical.non_finite_number"),
        (float("inf"), "canonical.non_finite_number"),
        (2**53, "canonical.number_out_of_range"),
        ({1: "a"}, "canonical.unsupported_type"),
        (b"bytes", "canonical.unsupported_type"),
        ({"s": "\udc00"}, "canonical.invalid_string"),
    ],
)
def test_writer_rejects_values_without_canonical_form(value: object, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        dumps(value)
    assert caught.value.code == code


def test_writer_bounds_depth() -> None:
    nested: list[object] = []
    for _ in range(canonical.MAX_DEPTH + 2):
        nested = [nested]
    with pytest.raises(CanonicalError) as caught:
        dumps(nested)
    assert caught.value.code == "canonical.too_deep"


def test_unregistered_code_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        CanonicalError("canonical.made_up", "x")


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-canonical.MAX_SAFE_INTEGER, max_value=canonical.MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    _json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_round_trip_is_a_fixed_point(value: object) -> None:
    once = dumps(value)
    parsed = loads_canonical(once)
    assert dumps(parsed) == once
    assert parsed == value


def test_integer_literal_beyond_safe_range_reads_as_a_double() -> None:
    assert loads(b"[9007199254740993]") == [9007199254740992.0]
    with pytest.raises(CanonicalError) as caught:
        loads_canonical(b"[9007199254740993]")
    assert caught.value.code == "canonical.non_canonical"


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_text_round_trips_to_the_same_double(value: float) -> None:
    assert float(format_number(value)) == value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.integers(0, 9), max_size=8))
def test_members_are_in_utf16_code_unit_order(value: dict[str, int]) -> None:
    keys = list(loads(dumps(value)))
    assert keys == sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
