"""Charset decoding shared by the binlog reader and typeconv."""

from __future__ import annotations

import pytest

from cdc import typeconv


def test_mysql_latin1_decodes_every_byte_like_the_server() -> None:
    codec = typeconv.text_codec("latin1")
    # The server converts latin1 0x80 to U+20AC (cp1252) and 0x81 to U+0081.
    assert b"\x80\x81\x8d\x8f\x90\x9d\xe9\xff".decode(codec) == "€\x81\x8d\x8f\x90\x9déÿ"
    assert bytes(range(256)).decode(codec).encode(codec) == bytes(range(256))
    assert typeconv.text_decoder("LATIN1")(b"\xe9") == "é"


def test_utf8_family() -> None:
    for name in ("utf8mb4", "utf8mb3", "utf8"):
        assert typeconv.text_decoder(name)("😀é".encode()) == "😀é"


def test_other_charsets_use_pymysql_names() -> None:
    assert typeconv.text_decoder("cp1251")(b"\xc0") == "А"
    assert typeconv.text_decoder("koi8r")(b"\xc1") == "а"


def test_binary_and_unknown_charsets_are_errors() -> None:
    with pytest.raises(ValueError, match="holds bytes, not text"):
        typeconv.text_codec("binary")
    with pytest.raises(ValueError, match="holds bytes, not text"):
        typeconv.text_codec(None)
    with pytest.raises(ValueError, match="no Python codec"):
        typeconv.text_codec("nosuchcharset")


def test_invalid_utf8_is_not_silently_replaced() -> None:
    with pytest.raises(UnicodeDecodeError):
        typeconv.text_decoder("utf8mb4")(b"\xff")
