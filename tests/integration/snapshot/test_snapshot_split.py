"""Splitting real tables into chunks, and reading every chunk back: the whole table, once."""

from __future__ import annotations

import logging
import random
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from cdc.model.schema import TableSchema
from cdc.snapshot import SnapshotChunk, SnapshotError, read_chunk, split_table
from cdc.snapshot.errors import TableGone
from cdc.snapshot.splitter import whole_table
from cdc.typeconv import RawDateTime


def canonical(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows as a sorted list of tuples: two lists compare as multisets."""
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


def read_all(src: Any, schema: TableSchema, chunks: list[SnapshotChunk]) -> list[list[Any]]:
    return [read_chunk(src.uri, src.info, schema, c).rows for c in chunks]


def assert_covers_table(src: Any, schema: TableSchema, chunks: list[SnapshotChunk]) -> None:
    """The chunks' rows together are the table's rows, none twice."""
    per_chunk = read_all(src, schema, chunks)
    union = [row for rows in per_chunk for row in rows]
    assert canonical(union) == canonical(src.rows(schema))
    assert [c.n for c in chunks] == list(range(len(chunks)))


def test_empty_table_is_one_unbounded_chunk(src: Any) -> None:
    src.execute(f"CREATE TABLE `{src.db}`.t (id INT PRIMARY KEY)")
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=10)
    assert [(c.lower, c.upper) for c in chunks] == [(None, None)]
    assert read_chunk(src.uri, src.info, schema, chunks[0]).rows == []


def test_a_table_renamed_since_its_schema_was_read_is_gone_not_an_sql_error(src: Any) -> None:
    """The split runs after the snapshot's anchor; a rename in between used to surface as
    the driver's error 1146 and fail the changefeed (fuzz seed 2026)."""
    src.execute(
        f"CREATE TABLE `{src.db}`.t (id INT PRIMARY KEY)",
        f"INSERT INTO `{src.db}`.t VALUES (1), (2)",
    )
    schema = src.schema("t")
    src.execute(f"RENAME TABLE `{src.db}`.t TO `{src.db}`.t_new")
    with pytest.raises(TableGone, match=rf"{src.db}\.t is not on the source any more"):
        split_table(src.snap, schema, chunk_size=1)
    assert [(c.lower, c.upper, c.key_column) for c in whole_table(schema)] == [(None, None, "id")]


def test_one_row_is_one_chunk(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (id INT PRIMARY KEY, v VARCHAR(5))",
        f"INSERT INTO `{src.db}`.t VALUES (42, 'x')",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=10)
    assert len(chunks) == 1
    result = read_chunk(src.uri, src.info, schema, chunks[0])
    assert result.rows == [{"id": 42, "v": "x"}]
    assert result.row_count == 1


def test_dense_integer_keys_split_arithmetically(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (id BIGINT UNSIGNED PRIMARY KEY, v INT)",
        f"INSERT INTO `{src.db}`.t SELECT seq, seq * 2 FROM seq_1_to_100",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=30)
    assert [(c.lower, c.upper) for c in chunks] == [
        (None, 31),
        (31, 61),
        (61, 91),
        (91, 100),
        (100, None),
    ]
    assert_covers_table(src, schema, chunks)


def test_the_tail_holds_only_what_was_inserted_above_the_plan(src: Any) -> None:
    """The last chunk starts at the MAX seen: rows inserted at the top while the snapshot
    runs land there, and no bounded chunk grows (the tail is read first)."""
    src.execute(
        f"CREATE TABLE `{src.db}`.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        f"INSERT INTO `{src.db}`.t (v) SELECT seq FROM seq_1_to_95",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=30)
    src.execute(f"INSERT INTO `{src.db}`.t (v) SELECT seq FROM seq_1_to_500")
    sizes = [len(rows) for rows in read_all(src, schema, chunks)]
    assert (chunks[-1].lower, chunks[-1].upper) == (95, None)
    assert sizes == [30, 30, 30, 4, 1 + 500]
    assert_covers_table(src, schema, chunks)


def test_text_keys_under_a_case_insensitive_collation_split_evenly(src: Any) -> None:
    """Boundaries come from the server's order, in the column's collation: with keys in
    mixed case every chunk holds exactly chunk_size rows (Python's order, in which every
    capital sorts before every small letter, is not the server's here)."""
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = {"".join(rng.choice(letters) for _ in range(8)) for _ in range(2100)}
    keys = sorted(names)[:2000]
    values = [
        ("".join(ch.upper() if rng.random() < 0.5 else ch for ch in k), n)
        for n, k in enumerate(keys)
    ]
    src.execute(
        f"CREATE TABLE `{src.db}`.t (name VARCHAR(12) COLLATE utf8mb4_general_ci "
        "PRIMARY KEY, n INT)"
    )
    with src.admin.cursor() as cur:
        cur.executemany(f"INSERT INTO `{src.db}`.t VALUES (%s, %s)", values)
    src.admin.commit()
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=100)
    sizes = [len(rows) for rows in read_all(src, schema, chunks)]
    assert sizes == [100] * 19 + [99, 1], sizes  # then the tail: the row at the MAX
    assert_covers_table(src, schema, chunks)


def test_sparse_keys_are_split_by_query_into_few_chunks(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (id BIGINT PRIMARY KEY)",
        f"INSERT INTO `{src.db}`.t VALUES (1), (2), (1000000000000)",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=2)
    assert [(c.lower, c.upper) for c in chunks] == [(None, 10**12), (10**12, None)]
    assert_covers_table(src, schema, chunks)
    assert len(split_table(src.snap, schema)) == 1


def test_composite_text_key_keeps_collation_equal_values_together(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (name VARCHAR(10) COLLATE utf8mb4_general_ci, n INT, "
        "v INT, PRIMARY KEY (name, n))",
        f"INSERT INTO `{src.db}`.t VALUES ('a',1,0),('A',2,0),('á',3,0),('b',1,0),('B',2,0),"
        "('e',1,0),('é',2,0),('E',3,0),('ë',4,0),('m',1,0),('z',1,0),('Z',2,0),('z ',3,0),"
        "('😀',1,0),('ß',1,0),('s',2,0)",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=2)
    assert all(c.key_column == "name" for c in chunks)
    assert len(chunks) > 2
    per_chunk = read_all(src, schema, chunks)
    assert canonical([r for rows in per_chunk for r in rows]) == canonical(src.rows(schema))
    for rows in per_chunk:
        if not rows:
            continue
        # Every row whose name equals one of this chunk's names (in the collation) is here.
        names = [r["name"] for r in rows]
        marks = ", ".join(["%s"] * len(names))
        with src.admin.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM `{src.db}`.t WHERE name IN ({marks})", names)
            assert cur.fetchone()[0] == len(rows)


def test_many_duplicates_of_the_first_key_column_stay_in_one_chunk(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (grp INT, id INT, PRIMARY KEY (grp, id))",
        f"INSERT INTO `{src.db}`.t SELECT 1, seq FROM seq_1_to_50",
        f"INSERT INTO `{src.db}`.t SELECT 2, seq FROM seq_1_to_3",
        f"INSERT INTO `{src.db}`.t SELECT 3, seq FROM seq_1_to_40",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=10)
    per_chunk = read_all(src, schema, chunks)
    chunks_of_group: dict[int, set[int]] = {}
    for n, rows in enumerate(per_chunk):
        for row in rows:
            chunks_of_group.setdefault(row["grp"], set()).add(n)
    assert all(len(found) == 1 for found in chunks_of_group.values()), chunks_of_group
    assert sum(len(rows) for rows in per_chunk) == 93
    assert len(chunks) <= 3


def test_evenly_repeated_first_column_splits_arithmetically_without_splitting_values(
    src: Any,
) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (grp INT, id INT, PRIMARY KEY (grp, id))",
        f"INSERT INTO `{src.db}`.t SELECT g.seq, i.seq FROM seq_1_to_20 g, seq_1_to_5 i",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=10)
    # 20 values x 5 rows: factor 0.2, so 2 values (10 rows) per chunk; the tail starts
    # at the MAX, 20, and holds its 5 rows.
    assert [c.lower for c in chunks[1:]] == [*range(3, 21, 2), 20]
    assert [len(rows) for rows in read_all(src, schema, chunks)] == [10] * 9 + [5, 5]


def test_unique_not_null_key_stands_in_for_a_primary_key(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (code VARCHAR(8) NOT NULL, v INT, note TEXT, "
        "UNIQUE KEY (code))",
        f"INSERT INTO `{src.db}`.t SELECT CONCAT('c', LPAD(seq, 3, '0')), seq, NULL "
        "FROM seq_1_to_25",
    )
    schema = src.schema("t")
    assert schema.primary_key == () and schema.key_columns == ("code",)
    chunks = split_table(src.snap, schema, chunk_size=10)
    assert [c.lower for c in chunks] == [None, "c011", "c021", "c025"]
    assert_covers_table(src, schema, chunks)


def test_keyless_table_without_chunk_key_is_refused_clearly(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (a INT, b INT, UNIQUE KEY (a))",
        f"INSERT INTO `{src.db}`.t VALUES (1, 1), (NULL, 2), (NULL, 2)",
    )
    with pytest.raises(SnapshotError) as info:
        split_table(src.snap, src.schema("t"))
    assert f'chunk-key-columns = {{ "{src.db}.t" = "<column>" }}' in str(info.value)


def test_keyless_table_with_chunk_key_covers_duplicates_and_nulls(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (a INT, b INT)",
        f"INSERT INTO `{src.db}`.t VALUES (1, 1), (1, 1), (2, 2), (NULL, 3), (NULL, 3), "
        "(5, 5), (5, 5), (5, 5), (9, 9)",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=2, chunk_key="a")
    assert len(chunks) > 1
    per_chunk = read_all(src, schema, chunks)
    assert Counter(r["a"] for r in per_chunk[0]).get(None) == 2
    assert canonical([r for rows in per_chunk for r in rows]) == canonical(src.rows(schema))


def test_chunk_key_overrides_the_primary_key(src: Any) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (id INT PRIMARY KEY, created DATE NOT NULL)",
        f"INSERT INTO `{src.db}`.t SELECT seq, '2024-01-01' + INTERVAL (seq MOD 7) DAY "
        "FROM seq_1_to_30",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=8, chunk_key="created")
    assert {c.key_column for c in chunks} == {"created"}
    assert_covers_table(src, schema, chunks)


KEY_TYPES = {
    "decimal(10,2)": "CAST(seq * 1.25 - 7 AS DECIMAL(10,2))",
    "datetime(6)": "'2024-01-01 00:00:00' + INTERVAL seq * 1000001 MICROSECOND",
    "timestamp(3)": "FROM_UNIXTIME(1700000000 + seq * 3601.5)",
    "time(1)": "SEC_TO_TIME(seq * 3600.5 - 40000)",
    "varbinary(8)": "UNHEX(LPAD(HEX(seq * 9), 4, '0'))",
    "binary(3)": "UNHEX(LPAD(HEX(seq * 7), 4, '0'))",
    "char(4) collate latin1_general_ci": "ELT(1 + seq MOD 4, 'a', 'B', 'c', 'D')",
    "double": "seq / 3",
}


@pytest.mark.parametrize("key_type", KEY_TYPES)
def test_chunk_boundaries_of_each_key_type_round_trip(src: Any, key_type: str) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (k {key_type} NOT NULL, n INT, PRIMARY KEY (k, n))",
        f"INSERT INTO `{src.db}`.t SELECT {KEY_TYPES[key_type]}, seq FROM seq_1_to_20",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=3)
    assert len(chunks) > 2
    assert_covers_table(src, schema, chunks)
    for c in chunks:
        assert SnapshotChunk.from_dict(c.to_dict()) == c


def test_zero_dates_in_the_chunk_key(src: Any) -> None:
    src.execute(
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        f"CREATE TABLE `{src.db}`.t (d DATETIME NOT NULL, n INT, PRIMARY KEY (d, n))",
        f"INSERT INTO `{src.db}`.t VALUES ('0000-00-00 00:00:00', 1), ('2024-00-15 10:00:00', 2),"
        " ('2024-01-01 00:00:00', 3), ('2024-02-31 00:00:00', 4), ('2024-03-01 00:00:00', 5)",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=1)
    assert [c.lower for c in chunks] == [
        None,
        RawDateTime(2024, 0, 15, 10),
        datetime(2024, 1, 1),
        RawDateTime(2024, 2, 31),
        datetime(2024, 3, 1),
    ]
    assert_covers_table(src, schema, chunks)


def test_unsplittable_key_type_reads_the_table_as_one_chunk(
    src: Any, caplog: pytest.LogCaptureFixture
) -> None:
    src.execute(
        f"CREATE TABLE `{src.db}`.t (k ENUM('z', 'a') PRIMARY KEY)",
        f"INSERT INTO `{src.db}`.t VALUES ('a'), ('z')",
    )
    schema = src.schema("t")
    with caplog.at_level(logging.WARNING, logger="cdc.snapshot.splitter"):
        chunks = split_table(src.snap, schema, chunk_size=1)
    assert [(c.lower, c.upper) for c in chunks] == [(None, None)]
    assert "cannot be split into ranges" in caplog.text
    assert_covers_table(src, schema, chunks)


def test_odd_identifiers_are_quoted(src: Any) -> None:
    src.execute(f"CREATE TABLE `{src.db}`.`we%ird``t` (`k%``ey` INT PRIMARY KEY)")
    src.execute(f"INSERT INTO `{src.db}`.`we%ird``t` SELECT seq FROM seq_1_to_9")
    schema = src.schema("we%ird`t")
    for size in (3, 2):  # arithmetic, then (a factor of 0.05 < 9/9) the same by query
        chunks = split_table(src.snap, schema, chunk_size=size)
        assert len(chunks) > 2
        assert_covers_table(src, schema, chunks)
