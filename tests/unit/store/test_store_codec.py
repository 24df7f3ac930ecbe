"""Versioned JSON values: written with "v", read only when the version is known."""

from __future__ import annotations

import pytest

from cdc.store.codec import FORMAT_VERSION, decode, encode
from cdc.store.errors import ValueFormatError


def test_encode_adds_the_version_and_is_stable() -> None:
    data = encode({"b": 1, "a": "ä"})
    assert data == '{"a":"ä","b":1,"v":1}'.encode()
    assert decode(data) == {"a": "ä", "b": 1, "v": FORMAT_VERSION}


def test_encode_keeps_a_known_version_and_does_not_mutate() -> None:
    obj = {"x": [1, 2]}
    assert decode(encode(obj)) == {"x": [1, 2], "v": 1}
    assert obj == {"x": [1, 2]}
    assert encode({"v": 1, "x": 0}) == b'{"v":1,"x":0}'


@pytest.mark.parametrize("version", [2, 0, "1", True, 1.0])
def test_encode_refuses_unknown_versions(version: object) -> None:
    with pytest.raises(ValueFormatError, match="cannot write format version"):
        encode({"v": version})


def test_encode_needs_an_object() -> None:
    with pytest.raises(TypeError, match="must be objects"):
        encode([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"v":2,"a":1}', r"at /k has format version 2, this build reads \[1\].*newer release"),
        (b'{"v":true}', "format version True"),
        (b'{"a":1}', "at /k has no format version 'v'"),
        (b"[1,2]", "at /k is JSON list, not an object"),
        (b"not json", "at /k is not JSON"),
        (b"\xff\xfe", "at /k is not JSON"),
    ],
)
def test_decode_rejects_with_the_key_in_the_message(data: bytes, message: str) -> None:
    with pytest.raises(ValueFormatError, match=message):
        decode(data, "/k")


def test_value_format_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode(b"{}")
