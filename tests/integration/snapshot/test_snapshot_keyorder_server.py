"""ServerTextOrder: text compared by the server in the column's collation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cdc.snapshot.errors import SnapshotError
from cdc.snapshot.keyorder import PREFETCH_BATCH, ServerTextOrder


def column(src: Any, column_type: str) -> Any:
    src.execute(f"CREATE TABLE `{src.db}`.t (k {column_type} PRIMARY KEY)")
    return src.schema("t").column("k")


def test_case_accent_and_pad_space_follow_the_collation(src: Any) -> None:
    order = ServerTextOrder(src.snap, column(src, "VARCHAR(10) COLLATE utf8mb4_general_ci"))
    assert order.compare("a", "A") == 0
    assert order.compare("e", "é") == 0
    assert order.compare("b ", "b") == 0
    assert order.compare("a", "B") < 0
    assert order.compare("Z", "a") > 0
    assert order.compare(b"a", b"b") < 0  # not text: ordered in Python


def test_binary_collation_tells_case_apart(src: Any) -> None:
    order = ServerTextOrder(src.snap, column(src, "VARCHAR(10) COLLATE utf8mb4_bin"))
    assert order.compare("a", "A") > 0
    assert order.compare("é", "e") > 0


def test_latin1_column(src: Any) -> None:
    order = ServerTextOrder(src.snap, column(src, "CHAR(4) CHARACTER SET latin1"))
    assert order.compare("É", "e") == 0
    assert order.compare("d", "É") < 0


def test_prefetch_asks_in_batches_and_then_answers_from_memory(src: Any) -> None:
    order = ServerTextOrder(src.snap, column(src, "VARCHAR(10) COLLATE utf8mb4_general_ci"))
    values = [f"v{i:04d}" for i in range(PREFETCH_BATCH)] + [b"raw", None]
    order.prefetch(values, ("v0100", None, "V0200"))
    assert order.queries == 2  # 2 * PREFETCH_BATCH pairs
    assert order.compare("v0150", "v0100") > 0
    assert order.compare("v0150", "V0200") < 0
    assert order.compare("v0200", "V0200") == 0
    assert order.queries == 2


def test_text_column_without_collation_is_refused(src: Any) -> None:
    broken = replace(column(src, "VARCHAR(10)"), collation=None)
    with pytest.raises(SnapshotError, match="charset/collation"):
        ServerTextOrder(src.snap, broken)
