"""The DBLog property on real MariaDB: writes between the steps, and no locks taken."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from cdc.model.events import Op
from cdc.model.position import Position
from cdc.snapshot import (
    ChunkHooks,
    ChunkSchemaChanged,
    SnapshotChunk,
    SnapshotError,
    read_chunk,
    split_table,
)
from cdc.snapshot import reader as reader_module


def canonical(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


class Phases:
    """Runs SQL at the reader's hooks and records the truth at the high watermark."""

    def __init__(
        self,
        src: Any,
        truth: Callable[[], list[dict[str, Any]]],
        after_low: list[str] = (),
        after_select: list[str] = (),
        after_high: list[str] = (),
    ) -> None:
        self.src = src
        self.truth_of = truth
        self.sql = {"low": list(after_low), "select": list(after_select), "high": list(after_high)}
        self.truth: list[dict[str, Any]] | None = None
        self.high: Position | None = None

    def _low(self, chunk: SnapshotChunk, low: Position) -> None:
        self.src.execute(*self.sql["low"])

    def _select(self, chunk: SnapshotChunk, count: int) -> None:
        self.src.execute(*self.sql["select"])

    def _high(self, chunk: SnapshotChunk, high: Position) -> None:
        self.high = high
        self.truth = self.truth_of()  # nothing else writes: this is the chunk at high
        self.src.execute(*self.sql["high"])

    def hooks(self) -> ChunkHooks:
        return ChunkHooks(self._low, self._select, self._high)


def test_writes_between_the_steps_are_folded_into_the_chunk(src: Any) -> None:
    t = f"`{src.db}`.t"
    src.execute(
        f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {t} SELECT seq, CONCAT('v', seq) FROM seq_1_to_39_step_2",  # odd ids
    )
    schema = src.schema("t")
    chunk = SnapshotChunk(schema.name, 1, "id", 10, 20)
    phases = Phases(
        src,
        lambda: src.rows(schema, "id >= 10 AND id < 20"),
        after_low=[
            f"INSERT INTO {t} VALUES (12, 'new12')",
            f"UPDATE {t} SET v = 'upd13' WHERE id = 13",
            f"DELETE FROM {t} WHERE id = 15",
            f"UPDATE {t} SET id = 41 WHERE id = 17",  # key leaves the range
            f"UPDATE {t} SET id = 18 WHERE id = 3",  # key enters the range
            f"UPDATE {t} SET v = 'outside' WHERE id = 25",
        ],
        after_select=[
            f"INSERT INTO {t} VALUES (14, 'new14')",
            f"UPDATE {t} SET v = 'upd11' WHERE id = 11",
            f"DELETE FROM {t} WHERE id = 19",
            f"UPDATE {t} SET id = 16 WHERE id = 21",  # enters
            f"UPDATE {t} SET id = 43 WHERE id = 12",  # a row inserted after low leaves
            f"UPDATE {t} SET v = 'twice' WHERE id = 18",
            f"INSERT INTO {t} VALUES (45, 'outside')",
        ],
        after_high=[
            f"DELETE FROM {t} WHERE id = 11",  # after high: must not show
            f"INSERT INTO {t} VALUES (10, 'late')",
        ],
    )
    result = read_chunk(src.uri, src.info, schema, chunk, phases.hooks())
    assert phases.truth is not None
    assert canonical(result.rows) == canonical(phases.truth)
    assert {r["id"] for r in result.rows} == {11, 13, 14, 16, 18}
    assert result.high_watermark == phases.high
    assert result.high_watermark.key() > result.low_watermark.key()
    assert result.folded > 0
    assert result.row_count == 5
    changes = list(result.row_changes())
    assert {c.op for c in changes} == {Op.READ}
    assert {c.position for c in changes} == {result.high_watermark}
    assert sorted(c.key for c in changes) == [(11,), (13,), (14,), (16,), (18,)]


def test_a_quiet_chunk_is_read_as_selected(src: Any) -> None:
    t = f"`{src.db}`.t"
    src.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)", f"INSERT INTO {t} VALUES (1), (2)")
    schema = src.schema("t")
    chunk = SnapshotChunk(schema.name, 0, "id")
    phases = Phases(
        src,
        lambda: src.rows(schema),
        after_select=[f"CREATE TABLE `{src.db}`.other (id INT PRIMARY KEY)"],
    )
    result = read_chunk(src.uri, src.info, schema, chunk, phases.hooks())
    # The binlog moved (DDL of another table), but nothing of this table changed.
    assert result.high_watermark.key() > result.low_watermark.key()
    assert result.folded == 0
    assert canonical(result.rows) == canonical(phases.truth)


def test_text_key_chunk_membership_follows_the_collation(src: Any) -> None:
    t = f"`{src.db}`.t"
    src.execute(
        f"CREATE TABLE {t} (name VARCHAR(10) COLLATE utf8mb4_general_ci, n INT, v INT, "
        "PRIMARY KEY (name, n))",
        f"INSERT INTO {t} VALUES ('a',1,0),('b',1,0),('c',1,0),('m',1,0),('x',1,0)",
    )
    schema = src.schema("t")
    chunk = SnapshotChunk(schema.name, 1, "name", "b", "m")
    phases = Phases(
        src,
        lambda: src.rows(schema, "name >= 'b' AND name < 'm'"),
        after_low=[
            f"INSERT INTO {t} VALUES ('B',2,1)",  # = 'b': inside
            f"INSERT INTO {t} VALUES ('M',2,1)",  # = 'm': outside
            f"INSERT INTO {t} VALUES ('É',1,1)",  # = 'e': inside
            f"UPDATE {t} SET name = 'À', n = 9 WHERE name = 'c'",  # = 'a': leaves
        ],
        after_select=[
            f"UPDATE {t} SET name = 'Ç' WHERE name = 'x'",  # = 'c': enters
            f"UPDATE {t} SET v = 5 WHERE name = 'b' AND n = 2",
            f"INSERT INTO {t} VALUES ('b ',3,1)",  # PAD SPACE: = 'b', inside
        ],
    )
    result = read_chunk(src.uri, src.info, schema, chunk, phases.hooks())
    assert canonical(result.rows) == canonical(phases.truth)
    assert sorted((r["name"], r["n"]) for r in result.rows) == sorted(
        [("b", 1), ("B", 2), ("É", 1), ("Ç", 1), ("b ", 3)]
    )


def test_unique_not_null_key_identifies_rows_in_the_fold(src: Any) -> None:
    t = f"`{src.db}`.t"
    src.execute(
        f"CREATE TABLE {t} (code INT NOT NULL, v INT, UNIQUE KEY (code))",
        f"INSERT INTO {t} SELECT seq, 0 FROM seq_1_to_9",
    )
    schema = src.schema("t")
    chunk = SnapshotChunk(schema.name, 0, "code", None, 5)
    phases = Phases(
        src,
        lambda: src.rows(schema, "code < 5"),
        after_low=[
            f"UPDATE {t} SET v = 1 WHERE code = 2",
            f"UPDATE {t} SET code = 0 WHERE code = 7",
        ],
        after_select=[
            f"DELETE FROM {t} WHERE code = 1",
            f"UPDATE {t} SET code = 18 WHERE code = 4",
        ],
    )
    result = read_chunk(src.uri, src.info, schema, chunk, phases.hooks())
    assert canonical(result.rows) == canonical(phases.truth)
    assert sorted(c.key for c in result.row_changes()) == [(0,), (2,), (3,)]


def test_keyless_chunk_is_read_again_until_it_stays_still(src: Any) -> None:
    t = f"`{src.db}`.t"
    src.execute(
        f"CREATE TABLE {t} (a INT, b INT)",
        f"INSERT INTO {t} VALUES (1, 1), (1, 1), (2, 2), (7, 7)",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=1, chunk_key="a")
    first = chunks[0]
    assert first.upper == 2
    writes = [f"INSERT INTO {t} VALUES (1, 1)", f"INSERT INTO {t} VALUES (9, 9)"]

    def once(chunk: SnapshotChunk, count: int) -> None:
        if writes:
            src.execute(writes.pop(0))

    result = read_chunk(src.uri, src.info, schema, first, ChunkHooks(after_select=once))
    # Attempt 1 saw an insert into the chunk; attempt 2 only one outside it.
    assert result.attempts == 2
    assert canonical(result.rows) == canonical(src.rows(schema, "a < 2 OR a IS NULL"))
    assert len(result.rows) == 3
    assert all(c.key == () for c in result.row_changes())


def test_keyless_chunk_that_never_stays_still_fails_clearly(
    src: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_module, "KEYLESS_ATTEMPTS", 2)
    t = f"`{src.db}`.t"
    src.execute(f"CREATE TABLE {t} (a INT, b INT)", f"INSERT INTO {t} VALUES (1, 1)")
    schema = src.schema("t")
    chunk = SnapshotChunk(schema.name, 0, "a")
    busy = ChunkHooks(after_select=lambda c, n: src.execute(f"UPDATE {t} SET b = b + 1"))
    with pytest.raises(SnapshotError, match="changed between the watermarks in each of 2 reads"):
        read_chunk(src.uri, src.info, schema, chunk, busy)


@pytest.mark.parametrize("phase", ["after_low_watermark", "after_select"])
def test_ddl_between_the_watermarks_asks_for_a_new_read(src: Any, phase: str) -> None:
    t = f"`{src.db}`.t"
    src.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)", f"INSERT INTO {t} VALUES (1)")
    schema = src.schema("t")
    chunk = SnapshotChunk(schema.name, 0, "id")
    alter = {phase: lambda *_: src.execute(f"ALTER TABLE {t} ADD COLUMN w INT")}
    with pytest.raises(ChunkSchemaChanged, match="read the chunk again"):
        read_chunk(src.uri, src.info, schema, chunk, ChunkHooks(**alter))


def test_a_value_the_old_type_cannot_hold_asks_for_a_new_read(src: Any) -> None:
    # Found by the randomized test (seed 1324): a FLOAT column made DOUBLE after the
    # anchor, then written a value no FLOAT holds; converting it as the anchor's FLOAT
    # failed the whole snapshot (OverflowError) instead of reading the chunk again
    # once the stream has the DDL.
    t = f"`{src.db}`.t"
    src.execute(
        f"CREATE TABLE {t} (id INT PRIMARY KEY, f FLOAT)", f"INSERT INTO {t} VALUES (1, 1.5)"
    )
    schema = src.schema("t")
    src.execute(f"ALTER TABLE {t} MODIFY COLUMN f DOUBLE", f"UPDATE {t} SET f = 1e300")
    chunk = SnapshotChunk(schema.name, 0, "id")
    with pytest.raises(ChunkSchemaChanged, match="read the chunk again"):
        read_chunk(src.uri, src.info, schema, chunk)
    assert [r["f"] for r in read_chunk(src.uri, src.info, src.schema("t"), chunk).rows] == [1e300]


def test_stale_chunk_key_column_is_reported(src: Any) -> None:
    src.execute(f"CREATE TABLE `{src.db}`.t (id INT PRIMARY KEY)")
    schema = src.schema("t")
    with pytest.raises(SnapshotError, match="no longer has"):
        read_chunk(src.uri, src.info, schema, SnapshotChunk(schema.name, 0, "gone"))


FORBIDDEN = re.compile(
    r"\bLOCK\s+TABLES?\b|\bFLUSH\s+TABLES?\b|\bLOCK\s+INSTANCE\b|\bFOR\s+UPDATE\b"
    r"|\bLOCK\s+IN\s+SHARE\s+MODE\b|\bFOR\s+SHARE\b|\bGET_LOCK\b|\bBACKUP\s+STAGE\b",
    re.IGNORECASE,
)


def test_no_lock_is_ever_taken(src: Any) -> None:
    t = f"`{src.db}`.t"
    src.execute(
        f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {t} SELECT seq, seq FROM seq_1_to_20",
    )
    schema = src.schema("t")
    with src.admin.cursor() as cur:
        cur.execute("SELECT @@global.general_log, @@global.log_output")
        saved_log, saved_output = cur.fetchone()
    try:
        src.execute(
            "SET GLOBAL log_output = 'TABLE'",
            "TRUNCATE TABLE mysql.general_log",
            "SET GLOBAL general_log = 1",
        )
        chunks = split_table(src.snap, schema, chunk_size=7)
        write = ChunkHooks(after_select=lambda c, n: src.execute(f"UPDATE {t} SET v = 0"))
        for chunk in chunks:
            read_chunk(src.uri, src.info, schema, chunk, write)
        src.execute("SET GLOBAL general_log = 0")
        with src.admin.cursor() as cur:
            cur.execute(
                "SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log"
            )
            logged = cur.fetchall()
    finally:
        src.execute(
            "SET GLOBAL general_log = 0",
            "TRUNCATE TABLE mysql.general_log",
            f"SET GLOBAL log_output = '{saved_output}'",
            f"SET GLOBAL general_log = {int(saved_log)}",
        )
    statements = [text for _, text in logged]
    # The log did capture the snapshot's work: its reads, watermarks and binlog dumps.
    assert any("START TRANSACTION WITH CONSISTENT SNAPSHOT" in s for s in statements)
    assert any("SHOW MASTER STATUS" in s for s in statements)
    assert any("`id` >= 8 AND `id` < 15" in s for s in statements)
    assert any(kind == "Binlog Dump" for kind, _ in logged)
    assert [s for s in statements if FORBIDDEN.search(s)] == []
