"""Lane folds of text keys (cdc.sink.mysql.keyfold) against the server's own collations:
a key of a ``general`` collation folds to exactly the weights the server compares."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cdc.model import Column
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.mysql.keyfold import KeyFolds

pytestmark = pytest.mark.integration

GENERAL = [
    ("utf8mb4", "utf8mb4_general_ci"),
    ("utf8mb4", "utf8mb4_general_nopad_ci"),
    ("utf8mb3", "utf8mb3_general_ci"),
    ("utf8mb3", "utf8mb3_general_nopad_ci"),
    ("utf8mb3", "utf8mb3_general_mysql500_ci"),
]


def folds_on(server: MariaDBServer) -> KeyFolds:
    def query(sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return tuple(cur.fetchone())
        finally:
            conn.close()

    return KeyFolds(query)


def weights(fold: str) -> bytes:
    return b"".join(ord(c).to_bytes(2, "big") for c in fold)


def sample(rnd: random.Random, supplementary: bool) -> str:
    """A short string mixing ASCII, spaces, NUL, accented and other BMP characters, and
    (for utf8mb4) characters beyond the BMP."""
    pools = [
        "abcXYZ019 -_",
        "\0 ",
        "éÉèßẞÆæøØıİǆǅǄﬁ",
        "".join(chr(c) for c in rnd.sample(range(0x100, 0xD800), 40)),
    ]
    if supplementary:
        pools.append("\U0001f600\U0001f601\U00020000")
    return "".join(rnd.choice(rnd.choice(pools)) for _ in range(rnd.randint(0, 9)))


@pytest.mark.parametrize(("charset", "collation"), GENERAL, ids=[c for _, c in GENERAL])
def test_a_general_collation_weighs_a_string_as_its_characters_in_a_row(
    sink_db: MariaDBServer, charset: str, collation: str
) -> None:
    """The claim the fold rests on: no expansions, contractions or ignorable characters,
    so the server's weight string of any string is its characters' weights (trailing
    spaces aside, which a PAD SPACE comparison ignores and the fold drops)."""
    fold = folds_on(sink_db).part_fold(
        Column("k", "varchar", "varchar(20)", False, charset=charset, collation=collation)
    )
    assert fold is not None
    rnd = random.Random(collation)
    texts = [sample(rnd, charset == "utf8mb4") for _ in range(400)]
    expression = f"WEIGHT_STRING(CONVERT(%s USING {charset}) COLLATE {collation})"
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join([expression] * len(texts))}", texts)
            server = cur.fetchone()
    finally:
        conn.close()
    space = weights(fold(" x"))[:2]
    for text, weight in zip(texts, server, strict=True):
        expected = weight
        while expected.endswith(space):
            expected = expected[:-2]
        assert weights(fold(text)) == expected, repr(text)


PAIRS = [
    ("sa", "ßa"),
    ("ss", "ß"),
    ("a", "A"),
    ("a ", "a"),
    ("é", "E"),
    ("Søren", "Soren"),
    ("ǆ", "dž"),
    ("I", "Y"),
    ("a\0", "a"),
    ("\U0001f600", "\U0001f601"),
    ("\U0001f600", "\ufffd"),
    ("ﬁ", "fi"),
]


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_general_nopad_ci"])
def test_two_keys_fold_alike_exactly_when_the_server_calls_them_one_row(
    sink_db: MariaDBServer, collation: str
) -> None:
    fold = folds_on(sink_db).part_fold(
        Column("k", "varchar", "varchar(20)", False, charset="utf8mb4", collation=collation)
    )
    assert fold is not None
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            for a, b in PAIRS:
                cur.execute(f"SELECT %s = %s COLLATE {collation}", (a, b))
                (equal,) = cur.fetchone()
                if "nopad" not in collation or not (a.endswith(" ") or b.endswith(" ")):
                    assert (fold(a) == fold(b)) is bool(equal), (a, b)
                else:  # NO PAD: 'a ' and 'a' differ; the fold merges them (one lane, in order)
                    assert fold(a) == fold(b) and not equal
    finally:
        conn.close()
