"""Which upserts of a lane transaction become LOAD DATA (cdc.sink.mysql.bulk): the
threshold per table and group, REPLACE tables only, deletes first, loads of at most
MAX_LOAD_ROWS rows, and the switch to statements when the downstream refuses local files."""

from __future__ import annotations

import logging

import pymysql
import pytest

from cdc.logs import get_logger
from cdc.model import Column, Position, TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.bulk import MAX_LOAD_ROWS, BulkLoads
from cdc.sink.mysql.loadfile import LOCAL_FILE_NAME
from cdc.sink.mysql.statements import TableWriter, plan

P = Position("binlog.000001", 100)


def writer(name: str = "t", *, safe_mode: bool = True) -> TableWriter:
    columns = (
        Column("id", "int", "int(11)", nullable=False),
        Column("y", "year", "year(4)"),
        Column("s", "varchar", "varchar(20)"),
    )
    return TableWriter(TableSchema(TableName("db", name), columns, ("id",)), safe_mode=safe_mode)


def upserts(w: TableWriter, keys: range) -> list:
    return [w.upsert({"id": k, "y": 2020 + k if k % 3 else 0, "s": f"s{k}"}, (k,), P) for k in keys]


def loads(min_rows: int = 3) -> BulkLoads:
    return BulkLoads(min_rows, get_logger("test.bulk"))


def refusal(code: int) -> SinkError:
    try:
        try:
            raise pymysql.err.OperationalError(code, "The used command is not allowed")
        except pymysql.err.OperationalError as exc:
            raise SinkError("refused", "LOAD DATA ...") from exc
    except SinkError as error:
        return error


def test_a_tables_upserts_from_the_threshold_on_are_one_load_after_its_deletes() -> None:
    t, u = writer("t"), writer("u")
    ops = [*upserts(t, range(1, 4)), t.delete((9,), P), *upserts(u, range(1, 3))]
    statements = plan(ops, 100, loads(3))
    assert [s.sql.split(" (")[0].split(" VALUES")[0] for s in statements] == [
        "DELETE FROM `db`.`t` WHERE `id` IN",
        f"LOAD DATA LOCAL INFILE '{LOCAL_FILE_NAME}' REPLACE INTO TABLE `db`.`t` CHARACTER SET "
        "utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'",
        "REPLACE INTO `db`.`u`",  # two rows: below the threshold
    ]
    load = statements[1]
    assert load.local_file is not None
    assert load.local_file.data == b"1\t2021\ts1\n2\t2022\ts2\n3\t0000\ts3\n"
    assert load.description == "LOAD DATA LOCAL INFILE ... REPLACE INTO TABLE `db`.`t` [3 row(s)]"
    # the key's last operation only: 3 upserts of 2 keys are 2 rows, below the threshold
    again = [*upserts(t, range(1, 3)), *upserts(t, range(1, 2))]
    assert [s.sql[:7] for s in plan(again, 100, loads(3))] == ["REPLACE"]


def test_on_duplicate_key_update_tables_keep_their_statements() -> None:
    t = writer(safe_mode=False)
    [statement] = plan(upserts(t, range(1, 10)), 100, loads(3))
    assert statement.sql.startswith("INSERT INTO") and statement.local_file is None


def test_a_load_carries_at_most_max_load_rows_rows() -> None:
    t = writer()
    rows = [op.params for op in upserts(t, range(MAX_LOAD_ROWS + 5))]
    statements = loads(3)(t, rows)
    assert statements is not None
    assert [s.description.rsplit("[", 1)[1] for s in statements] == [
        f"{MAX_LOAD_ROWS} row(s)]",
        "5 row(s)]",
    ]


def test_a_refusal_turns_loads_off_for_good_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    bulk = loads(1)
    t = writer()
    rows = [op.params for op in upserts(t, range(5))]
    assert bulk.active and bulk(t, rows) is not None
    assert not bulk.refused(refusal(1205))  # a lock wait is no refusal
    assert bulk.active
    assert bulk.refused(refusal(1148)) and bulk.refused(refusal(4166))
    assert not bulk.active and bulk(t, rows) is None
    said = [r for r in caplog.records if "refuses LOAD DATA LOCAL INFILE" in r.getMessage()]
    assert len(said) == 1 and "local_infile=ON" in said[0].getMessage()


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_the_threshold_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="min_rows must be an int >= 1"):
        BulkLoads(bad, get_logger("test.bulk"))  # type: ignore[arg-type]
