"""Which text key parts choose a lane (cdc.sink.mysql.keyfold, statements.TableWriter): a
collation without a known safe fold leaves its part out, so its spellings share a lane."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.model import Column, Position, TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.keyfold import KeyFolds
from cdc.sink.mysql.routing import fold_text
from cdc.sink.mysql.statements import TableWriter

T = TableName("shop", "people")


def no_server(sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    raise AssertionError(f"asked the server: {sql[:60]}")


def text(name: str, collation: str | None, charset: str | None = "utf8mb4") -> Column:
    return Column(name, "varchar", "varchar(20)", False, charset=charset, collation=collation)


@pytest.mark.parametrize(
    "collation",
    [
        "utf8mb4_unicode_ci",  # expansions ('ß' = 'ss') and ignorable characters
        "utf8mb4_unicode_520_ci",
        "utf8mb4_uca1400_ai_ci",  # contractions ('и' + breve = 'й')
        "utf8mb4_0900_ai_ci",
        "utf8mb4_danish_ci",  # 'aa' = 'å'
        "utf8mb4_lithuanian_ci",  # 'I' = 'Y'
        "latin1_swedish_ci",
        None,
    ],
)
def test_a_collation_without_a_safe_fold_is_left_out_of_the_lane(collation: str | None) -> None:
    assert KeyFolds(no_server).part_fold(text("k", collation)) is None


@pytest.mark.parametrize("collation", ["utf8mb4_bin", "utf8mb4_nopad_bin", "utf8_bin", "binary"])
def test_binary_collations_fold_by_case_and_accents_without_the_server(collation: str) -> None:
    assert KeyFolds(no_server).part_fold(text("k", collation)) is fold_text
    assert KeyFolds(no_server).part_fold(text("k", None, charset=None)) is fold_text


def writer(*key: Column) -> TableWriter:
    columns = (*key, Column("v", "int", "int(11)", nullable=False))
    schema = TableSchema(T, columns, tuple(c.name for c in key))
    return TableWriter(schema, safe_mode=True, folds=KeyFolds(no_server))


def test_a_key_part_left_out_routes_by_the_other_parts_or_by_table() -> None:
    tenant = Column("tenant", "int", "int(11)", nullable=False)
    composite = writer(tenant, text("name", "utf8mb4_unicode_ci"))
    assert composite.lane_parts == (0,)
    upsert = composite.upsert(
        {"tenant": 7, "name": "Straße", "v": 1}, (7, "Straße"), Position("b.1", 4)
    )
    assert upsert.folded == (7, fold_text("Straße"))  # plan() still groups by spelling
    assert writer(text("name", "utf8mb4_unicode_ci")).lane_parts == ()
    assert writer(tenant, text("name", "utf8mb4_bin")).lane_parts is None
    assert writer(tenant).lane_parts is None


@pytest.mark.parametrize(
    ("plane_bytes", "beyond_bytes"),
    [(1, 2), (3, 2), (2, 3), (2, 0)],
    ids=["plane-short", "plane-long", "beyond-long", "beyond-empty"],
)
def test_weights_not_two_bytes_a_character_stop_the_sink_instead_of_folding_wrong(
    plane_bytes: int, beyond_bytes: int
) -> None:
    """A downstream whose general collation weighs characters otherwise than in 2 bytes
    (a server or version this fold was not built on) gets no fold that could put two
    spellings of one row on two lanes: the sink stops, naming the collation."""

    def odd_server(sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        characters, beyond = args
        return b"\x00" * (plane_bytes * len(characters)), b"\x00" * (beyond_bytes * len(beyond))

    with pytest.raises(SinkError, match="utf8mb4_general_ci did not weigh each character as 2"):
        KeyFolds(odd_server).part_fold(text("k", "utf8mb4_general_ci"))


def test_general_weights_fold_spellings_the_collation_calls_equal_together() -> None:
    """With 2-byte weights the fold maps each character to its weight and drops trailing
    spaces (PAD SPACE): equal weights, equal folds; characters beyond the BMP all weigh
    what the server gave for the one asked."""

    def server(sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        characters, beyond = args
        weigh = [ord(c.upper()) if c.isascii() else ord(c) for c in characters]
        return b"".join(w.to_bytes(2, "big") for w in weigh), b"\xff\xfd"

    fold = KeyFolds(server).part_fold(text("k", "utf8mb4_general_ci"))
    assert fold is not None
    assert fold("Ab ") == fold("aB") != fold("ab_")
    assert fold("x\U0001f600") == fold("X\U0001f601")
