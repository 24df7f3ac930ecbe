"""When a chunk's GROUP_CONCAT value is taken as its lines, and when it is read again."""

from __future__ import annotations

import pytest

from cdc.snapshot.textlines import grouped_whole


@pytest.mark.parametrize(
    ("data", "rows", "limit", "whole"),
    [
        (b"1\ta\n2\tb\n3\tc", 3, 100, True),
        (b"", 1, 100, True),  # one row whose line is empty
        (b"\n", 2, 100, True),  # two of them
        (None, 3, 100, False),  # longer than max_allowed_packet: NULL
        (b"1\ta\n3\tc", 3, 100, False),  # a NULL line (too long) was skipped
        # a cut value ends within a character (4 bytes) of the limit: maybe cut
        (b"1\ta\n2\tb\n3\tc", 3, 14, False),
        (b"1\ta\n2\tb\n3\tc", 3, 11, False),
        (b"1\ta\n2\tb\n3\t", 3, 10, False),  # cut inside the last line: as many lines
        (b"1\ta\n2\tb\n3\tc", 3, 15, True),
    ],
)
def test_grouped_whole(data: bytes | None, rows: int, limit: int, whole: bool) -> None:
    assert grouped_whole(data, rows, limit) is whole
