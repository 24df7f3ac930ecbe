"""Sizes and durations in URIs and config files."""

import pytest

from cdc.errors import ConfigError
from cdc.uri.units import format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1048576", 1048576),
        ("64MiB", 64 * 1024**2),
        ("64mib", 64 * 1024**2),
        ("1GB", 10**9),
        ("1.5KiB", 1536),
        ("10 MB", 10**7),
        ("2TiB", 2 * 1024**4),
        ("512B", 512),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text, field="f") == size


@pytest.mark.parametrize("text", ["", "MiB", "64XB", "-1", "1.5", "64 Mi B", "ten"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_size(text, field="sink-uri.file-size")
    assert info.value.field == "sink-uri.file-size"
    assert "64MiB" in info.value.message


@pytest.mark.parametrize("size", [1, 1000, 1024, 64 * 1024**2, 10**9, 1536, 3 * 1024**4])
def test_format_size_round_trips(size: int) -> None:
    assert parse_size(format_size(size), field="f") == size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("200ms", 0.2), ("1m", 60.0), ("1m30s", 90.0), ("2h", 7200.0), ("1.5s", 1.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text, field="f") == pytest.approx(seconds)


def test_parse_duration_needs_a_unit() -> None:
    with pytest.raises(ConfigError, match="add a unit") as info:
        parse_duration("5", field="sink-uri.flush-interval")
    assert info.value.field == "sink-uri.flush-interval"


@pytest.mark.parametrize("text", ["", "s", "5 sec", "5d", "-5s", "5s5"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match=r"not a duration.*e\.g\. 5s"):
        parse_duration(text, field="f")
