"""Planted differences between the source and the downstream MariaDB: every one found, no other."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from cdc.diff import CompareMode, DiffInputError, DiffKind, DiffReport, TableStatus

pytestmark = pytest.mark.integration

M, E, D = DiffKind.MISSING_IN_TARGET, DiffKind.EXTRA_IN_TARGET, DiffKind.DIFFERENT

TYPES_TABLE = """
CREATE TABLE t_types (
  id INT PRIMARY KEY,
  v_text VARCHAR(20) NULL,
  v_char CHAR(5) NULL,
  v_float FLOAT NULL,
  v_double DOUBLE NULL,
  v_dec DECIMAL(10,2) NULL,
  v_dt DATETIME(6) NULL,
  v_ts TIMESTAMP(3) NULL DEFAULT NULL,
  v_date DATE NULL,
  v_time TIME(2) NULL,
  v_year YEAR NULL,
  v_blob BLOB NULL,
  v_bin BINARY(4) NULL,
  v_bit BIT(12) NULL,
  v_enum ENUM('a', 'é', 'c') NULL,
  v_set SET('x', 'y', 'z') NULL,
  v_json JSON NULL,
  v_emoji VARCHAR(10) CHARACTER SET utf8mb4 NULL,
  v_latin VARCHAR(10) CHARACTER SET latin1 NULL
) DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_general_ci
"""
TYPES_ROW = (
    "'text', 'ch', 1.5, 0.1e0 + 0.2e0, 12.50, '2024-01-01 10:00:00.123456', "
    "'2024-01-01 10:00:00.123', '2024-02-29', '-12:30:00.25', 2024, X'00FF', X'0102', "
    "b'101', 'é', 'x,z', '{\"a\": [1, 2.5]}', '😀', 'café'"
)
# id -> SET clause applied on the target only (the source keeps TYPES_ROW)
TYPES_PLANTED = {
    3: "v_text = 'text '",  # a trailing space
    4: "v_float = 1.5000001",  # the next float32 up, more or less
    5: "v_dec = 12.51",
    6: "v_dt = '2024-01-01 10:00:00.123457'",  # one microsecond
    7: "v_blob = X'00FE'",  # one byte
    8: "v_emoji = '😃'",
    10: "v_text = 'TEXT'",  # equal in the collation, not the same value
    11: "v_double = 0.3",  # 0.1 + 0.2 is 0.30000000000000004
    12: "v_json = '{\"a\": [1, 2.50]}'",
    13: "v_latin = 'cafe'",
    14: "v_ts = '2024-01-01 10:00:00.124'",
    15: "v_bit = b'100'",
    16: "v_time = '-12:30:00.26'",
}
TYPES_EXPECTED = {
    2: (D, ("v_text",)),  # NULL on the source, '' on the target
    3: (D, ("v_text",)),
    4: (D, ("v_float",)),
    5: (D, ("v_dec",)),
    6: (D, ("v_dt",)),
    7: (D, ("v_blob",)),
    8: (D, ("v_emoji",)),
    9: (M, ()),
    10: (D, ("v_text",)),
    11: (D, ("v_double",)),
    12: (D, ("v_json",)),
    13: (D, ("v_latin",)),
    14: (D, ("v_ts",)),
    15: (D, ("v_bit",)),
    16: (D, ("v_time",)),
    17: (D, ("v_char", "v_set")),
    100: (E, ()),
}


def found(report: DiffReport, pair: Any, name: str) -> dict[Any, tuple[DiffKind, tuple[str, ...]]]:
    table = pair.of(report, name)
    keys = [row.key if len(row.key) > 1 else row.key[0] for row in table.rows]
    assert len(set(keys)) == len(keys), keys
    return {k: (row.kind, row.columns) for k, row in zip(keys, table.rows, strict=True)}


def plant_types(pair: Any) -> None:
    pair.both(TYPES_TABLE)
    values = ", ".join(f"({i}, {TYPES_ROW})" for i in range(1, 21))
    pair.both(
        f"INSERT INTO t_types VALUES {values}",
        # rows equal on both sides with the awkward values: all NULL, zero dates, negatives
        "INSERT INTO t_types (id) VALUES (30)",
        "INSERT INTO t_types (id, v_text, v_date, v_dt, v_dec, v_double, v_blob, v_time, "
        "v_bin, v_set) VALUES (31, '', '0000-00-00', '0000-00-00 00:00:00', -0.50, -1e300, "
        "X'', '-838:59:59', X'00', '')",
        "INSERT INTO t_types (id, v_float, v_double, v_text) VALUES (32, 3.4e38, 5e-324, '  ')",
    )
    pair.source("UPDATE t_types SET v_text = NULL WHERE id = 2")
    pair.target("UPDATE t_types SET v_text = '' WHERE id = 2")
    for key, assignment in TYPES_PLANTED.items():
        pair.target(f"UPDATE t_types SET {assignment} WHERE id = {key}")
    pair.target(
        "UPDATE t_types SET v_char = 'ch ', v_set = 'z,x' WHERE id = 17",  # equal values
        "UPDATE t_types SET v_char = 'cH', v_set = 'x' WHERE id = 17",
        "DELETE FROM t_types WHERE id = 9",
        f"INSERT INTO t_types VALUES (100, {TYPES_ROW})",
    )


def test_every_planted_difference_is_found_and_no_other(pair: Any) -> None:
    plant_types(pair)
    # several chunks, differences in three of them
    pair.both(
        "CREATE TABLE t_many (id INT PRIMARY KEY, v INT NOT NULL)",
        "INSERT INTO t_many SELECT seq, seq * 3 FROM seq_1_to_5000",
    )
    pair.target(
        "UPDATE t_many SET v = 0 WHERE id IN (10, 2600)",
        "DELETE FROM t_many WHERE id = 4000",
        "INSERT INTO t_many VALUES (6000, 1)",
    )
    # a composite string key in a case-insensitive, PAD SPACE collation
    pair.both(
        "CREATE TABLE t_composite (a VARCHAR(20) NOT NULL, b VARCHAR(20) NOT NULL, v INT, "
        "PRIMARY KEY (a, b)) DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_general_ci",
        "INSERT INTO t_composite VALUES ('x', '1', 1), ('y', '2', 2), ('Case', 'k', 3), "
        "('pad', 'k', 4), ('same', 'k', 5)",
    )
    pair.target(
        "UPDATE t_composite SET v = 10 WHERE a = 'x'",
        "DELETE FROM t_composite WHERE a = 'y'",
        "INSERT INTO t_composite VALUES ('z', '3', 3)",
        "UPDATE t_composite SET a = 'case' WHERE a = 'Case'",
        "UPDATE t_composite SET a = 'pad ' WHERE a = 'pad'",
    )
    # no key at all: compared whole, rows as a multiset
    pair.both("CREATE TABLE t_nokey (a INT, b VARCHAR(10))")
    pair.source("INSERT INTO t_nokey VALUES (1, 'x'), (1, 'x'), (3, NULL), (4, 'same')")
    pair.target("INSERT INTO t_nokey VALUES (1, 'x'), (2, 'y'), (3, ''), (4, 'same')")
    # a unique NOT NULL key instead of a primary key
    pair.both(
        "CREATE TABLE t_unique (code VARBINARY(8) NOT NULL, v INT, UNIQUE KEY (code))",
        "INSERT INTO t_unique VALUES (X'01', 1), (X'02', 2)",
    )
    pair.target("UPDATE t_unique SET v = NULL WHERE code = X'02'")
    # the same everywhere
    pair.both("CREATE TABLE t_empty (id INT PRIMARY KEY)")
    pair.both(
        "CREATE TABLE t_same (id BIGINT PRIMARY KEY, s VARCHAR(30))",
        "INSERT INTO t_same SELECT seq, CONCAT('row ', seq) FROM seq_1_to_300",
    )
    # tables and columns on one side only
    pair.source("CREATE TABLE t_missing (id INT PRIMARY KEY)")
    pair.target("CREATE TABLE t_extra (id INT PRIMARY KEY)")
    pair.source("CREATE TABLE t_cols (id INT PRIMARY KEY, a INT, b INT)")
    pair.target("CREATE TABLE t_cols (id INT PRIMARY KEY, a INT)")
    pair.source("INSERT INTO t_cols VALUES (1, 1, 1)")
    pair.target("INSERT INTO t_cols VALUES (1, 1)")
    # excluded by the filter
    pair.source("CREATE TABLE t_skip (id INT PRIMARY KEY)", "INSERT INTO t_skip VALUES (1)")
    pair.target("CREATE TABLE t_skip (id INT PRIMARY KEY)")

    report = pair.check(f"{pair.db}.*", f"!{pair.db}.t_skip", chunk_size=500, threads=2)

    assert not report.equal
    statuses = {t.table.table: t.status for t in report.tables}
    assert statuses == {
        "t_types": TableStatus.DIFFERENT,
        "t_many": TableStatus.DIFFERENT,
        "t_composite": TableStatus.DIFFERENT,
        "t_nokey": TableStatus.DIFFERENT,
        "t_unique": TableStatus.DIFFERENT,
        "t_empty": TableStatus.EQUAL,
        "t_same": TableStatus.EQUAL,
        "t_missing": TableStatus.MISSING_IN_TARGET,
        "t_extra": TableStatus.EXTRA_IN_TARGET,
        "t_cols": TableStatus.DIFFERENT,
    }
    assert found(report, pair, "t_types") == TYPES_EXPECTED

    many = pair.of(report, "t_many")
    assert found(report, pair, "t_many") == {
        10: (D, ("v",)),
        2600: (D, ("v",)),
        4000: (M, ()),
        6000: (E, ()),
    }
    assert many.chunks == 10
    assert many.chunks_different == 4  # chunks 0, 5, 7 and the last (unbounded: 6000)
    assert (many.rows_source, many.rows_target) == (5000, 5000)
    assert many.mode is CompareMode.KEYED

    assert found(report, pair, "t_composite") == {
        ("x", "1"): (D, ("v",)),
        ("y", "2"): (M, ()),
        ("Case", "k"): (D, ("a",)),  # the collation's same key: one row, its key differs
        ("pad", "k"): (D, ("a",)),  # 'pad' = 'pad ' in a PAD SPACE collation
        ("z", "3"): (E, ()),
    }

    nokey = pair.of(report, "t_nokey")
    assert nokey.mode is CompareMode.WHOLE
    assert "no primary key" in nokey.note
    whole = sorted(
        (row.kind.value, row.source if row.source is not None else row.target) for row in nokey.rows
    )
    assert whole == sorted(
        [
            ("missing-in-target", (1, "x")),
            ("missing-in-target", (3, None)),
            ("extra-in-target", (2, "y")),
            ("extra-in-target", (3, "")),
        ]
    )
    assert found(report, pair, "t_unique") == {b"\x02": (D, ("v",))}

    empty = pair.of(report, "t_empty")
    assert (empty.chunks, empty.rows_source, empty.rows_target, empty.rows) == (1, 0, 0, ())
    same = pair.of(report, "t_same")
    assert (same.rows_source, same.rows_target, same.rows) == (300, 300, ())

    cols = pair.of(report, "t_cols")
    assert cols.missing_columns == ("b",)
    assert cols.rows == ()  # the columns both sides have are equal

    data = report.to_dict()
    assert data["summary"]["tables_different"] == 8
    types = next(t for t in data["tables"] if t["table"].endswith(".t_types"))
    by_key = {d["key"]["id"]: d for d in types["differences"]}
    assert by_key[2]["source"] == {"v_text": None} and by_key[2]["target"] == {"v_text": ""}
    assert by_key[7]["source"] == {"v_blob": "0x00ff"}
    assert by_key[9] == {"kind": "missing-in-target", "key": {"id": 9}}


def test_equal_tables_with_differently_declared_columns_are_equal(
    pair: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pair.source(
        "CREATE TABLE t_decl (id INT(11) PRIMARY KEY, d DECIMAL(10,2), t DATETIME(3), "
        "m TIME, s VARCHAR(10), f DOUBLE)"
    )
    pair.target(  # other column order, other scale / precision / width: the same values
        "CREATE TABLE t_decl (f DOUBLE, s VARCHAR(10), m TIME(4), t DATETIME(6), "
        "d DECIMAL(12,4), id BIGINT PRIMARY KEY)"
    )
    pair.both(
        "INSERT INTO t_decl (id, d, t, m, s, f) VALUES "
        "(1, 12.5, '2024-05-01 01:02:03.5', '-01:00:00', 'a', 0.1), "
        "(2, 100, '2024-05-01 01:02:03', '838:59:59', NULL, -0.0), "
        "(3, -0.01, NULL, NULL, '', 1e300)"
    )
    caplog.set_level(logging.INFO, logger="cdc.diff.checker")
    report = pair.check()
    table = pair.of(report, "t_decl")
    assert table.status is TableStatus.EQUAL, table.to_dict()
    assert report.equal
    # the checksums agree by themselves: no chunk needed its rows compared
    assert "checksums differ" not in caplog.text
    assert {d.column for d in table.type_differences} == {"id", "d", "t", "m"}


def test_big_equal_table_reports_zero_differences(
    pair: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cdc.diff.checker")
    pair.both(
        "CREATE TABLE t_big (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(12,2), "
        "at DATETIME(6), f FLOAT)",
        "INSERT INTO t_big SELECT seq, CONCAT('name-', seq, '-😀'), seq / 7, "
        "'2024-01-01' + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, seq / 3 FROM "
        "seq_1_to_20000",
    )
    report = pair.check(chunk_size=1000, threads=2)
    big = pair.of(report, "t_big")
    assert report.equal
    assert (big.rows_source, big.rows_target, big.chunks, big.chunks_different) == (
        20000,
        20000,
        20,
        0,
    )
    assert "checksums differ" not in caplog.text


def test_a_filter_matching_no_table_is_bad_input(pair: Any) -> None:
    pair.both("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(DiffInputError, match="matches no table on the source"):
        pair.check(f"{pair.db}.nothing_*")


def test_rows_decide_when_only_the_checksum_text_differs(
    pair: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pair.source("CREATE TABLE t_num (id INT PRIMARY KEY, v DOUBLE)")
    pair.target("CREATE TABLE t_num (id INT PRIMARY KEY, v BIGINT)")
    pair.both("INSERT INTO t_num VALUES (1, 1e16), (2, 7)")  # '1e16' vs '10000000000000000'
    caplog.set_level(logging.INFO, logger="cdc.diff.checker")
    report = pair.check()
    table = pair.of(report, "t_num")
    assert "checksums differ but every row compares equal" in caplog.text
    assert table.status is TableStatus.EQUAL
    assert (table.chunks_different, table.rows) == (0, ())


@pytest.mark.parametrize(
    ("collation", "expected"),
    [
        # NO PAD: 'pad' and 'pad ' are two keys; binary case: 'Case' and 'case' too
        ("utf8mb4_nopad_bin", {("Case",): M, ("pad",): M, ("case",): E, ("pad ",): E}),
        # PAD SPACE, case-insensitive, accent-insensitive: the same keys, rows that differ
        ("utf8mb4_unicode_ci", {("Case",): D, ("pad",): D, ("Cafe",): D}),
    ],
)
def test_text_keys_match_as_the_collation_says(
    pair: Any, collation: str, expected: dict[tuple[str, ...], DiffKind]
) -> None:
    pair.both(
        f"CREATE TABLE t_coll (k VARCHAR(10) PRIMARY KEY, v INT) "
        f"DEFAULT CHARSET utf8mb4 COLLATE {collation}",
        "INSERT INTO t_coll VALUES ('Case', 1), ('pad', 2), ('Cafe', 3), ('same', 4)",
    )
    pair.target(
        "DELETE FROM t_coll WHERE v IN (1, 2)",
        "INSERT INTO t_coll VALUES ('case', 1), ('pad ', 2)",
    )
    if collation.endswith("_ci"):
        pair.target("UPDATE t_coll SET k = 'Café' WHERE v = 3")
    report = pair.check()
    table = pair.of(report, "t_coll")
    assert {row.key: row.kind for row in table.rows} == expected
    assert all(row.columns == ("k",) for row in table.rows if row.kind is D)


def test_duplicate_rows_do_not_cancel_out(pair: Any) -> None:
    # a XOR of row hashes is 0 for both sides here (same count, each row twice)
    pair.both("CREATE TABLE t_dup (a INT, b VARCHAR(5))")
    pair.source("INSERT INTO t_dup VALUES (1, 'a'), (1, 'a')")
    pair.target("INSERT INTO t_dup VALUES (2, 'b'), (2, 'b')")
    table = pair.of(pair.check(), "t_dup")
    assert (
        sorted(row.kind.value for row in table.rows)
        == ["extra-in-target"] * 2 + ["missing-in-target"] * 2
    )
