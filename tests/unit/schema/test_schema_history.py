"""SchemaHistory: versions by position, ordering rules, gc and persistence."""

from __future__ import annotations

import json

import pytest

from cdc.model import Column, DdlKind, Flavor, GtidSet, Position, TableName, TableSchema
from cdc.schema.ddl import parse_ddl
from cdc.schema.history import SchemaHistory

T = TableName("db", "t")
U = TableName("db", "u")


def pos(offset: int, file: str = "binlog.000002") -> Position:
    return Position(file, offset)


def table(name: TableName, *columns: str) -> TableSchema:
    return TableSchema(
        name, tuple(Column(c, "int", "int(11)") for c in columns), primary_key=(columns[0],)
    )


def ddl(offset: int, statement: str) -> object:
    return parse_ddl(statement, "db", pos(offset))


@pytest.fixture
def history() -> SchemaHistory:
    """t created before the start; at 200 a column is added, at 300 t is dropped."""
    h = SchemaHistory.initial({T: table(T, "a")}, pos(100))
    h.apply(ddl(200, "ALTER TABLE t ADD COLUMN b INT"))
    h.apply(ddl(300, "DROP TABLE t"))
    return h


def test_lookup_around_each_ddl(history: SchemaHistory) -> None:
    assert history.at(T, pos(100)).column_names == ("a",)
    assert history.at(T, pos(150)).column_names == ("a",)
    # the DDL at 200 applies to events after it, not to itself
    assert history.at(T, pos(200)).column_names == ("a",)
    assert history.at(T, pos(201)).column_names == ("a", "b")
    assert history.at(T, pos(300)).column_names == ("a", "b")
    assert history.at(T, pos(301)) is None
    assert history.at(T, pos(5, "binlog.000003")) is None
    assert history.current(T) is None
    assert history.at(U, pos(150)) is None


def test_versions_grow(history: SchemaHistory) -> None:
    assert history.at(T, pos(150)).version == 0
    assert history.at(T, pos(250)).version == 1


def test_recreated_table_continues_the_version_count(history: SchemaHistory) -> None:
    history.apply(ddl(400, "CREATE TABLE t (z INT)"))
    assert history.current(T).version == 2
    assert history.at(T, pos(350)) is None
    assert history.at(T, pos(401)).column_names == ("z",)


def test_positions_across_binlog_files() -> None:
    h = SchemaHistory.initial({T: table(T, "a")}, Position("binlog.000009", 900))
    h.apply(parse_ddl("ALTER TABLE t ADD b INT", "db", Position("binlog.000010", 4)))
    assert h.at(T, Position("binlog.000009", 100_000)).column_names == ("a",)
    assert h.at(T, Position("binlog.000010", 5)).column_names == ("a", "b")


def test_tables_at(history: SchemaHistory) -> None:
    history.apply(ddl(250 + 100, "CREATE TABLE u (x INT)"))
    assert set(history.tables_at(pos(150))) == {T}
    assert set(history.tables_at(pos(320))) == set()
    assert set(history.tables_at(pos(351))) == {U}
    assert history.tables_at(pos(201))[T].column_names == ("a", "b")


def test_rename_moves_the_schema() -> None:
    h = SchemaHistory.initial({T: table(T, "a")}, pos(100))
    h.apply(ddl(200, "RENAME TABLE t TO u"))
    assert h.at(T, pos(150)).column_names == ("a",)
    assert h.at(T, pos(201)) is None
    assert h.at(U, pos(200)) is None
    assert h.at(U, pos(201)).name == U


def test_ddl_at_or_before_the_last_position_is_refused(history: SchemaHistory) -> None:
    with pytest.raises(ValueError, match="not after the last applied position"):
        history.apply(ddl(300, "CREATE TABLE u (x INT)"))
    with pytest.raises(ValueError, match="not after the last applied position"):
        history.apply(ddl(250, "CREATE TABLE u (x INT)"))
    fresh = SchemaHistory.initial({}, pos(100))
    with pytest.raises(ValueError, match="binlog order"):
        fresh.apply(ddl(100, "CREATE TABLE u (x INT)"))


def test_ddl_of_another_binlog_base_name_is_refused(history: SchemaHistory) -> None:
    with pytest.raises(ValueError, match="different binlogs"):
        history.apply(parse_ddl("CREATE TABLE u (x INT)", "db", Position("other.000001", 5)))


def test_positions_before_the_horizon_raise(history: SchemaHistory) -> None:
    with pytest.raises(ValueError, match="before the schema history's horizon"):
        history.at(T, pos(99))
    with pytest.raises(ValueError, match="horizon"):
        history.tables_at(pos(1))


def test_statements_that_change_nothing_add_no_version(history: SchemaHistory) -> None:
    history.apply(ddl(400, "CREATE TABLE u (x INT)"))
    history.apply(ddl(500, "TRUNCATE u"))
    history.apply(ddl(600, "ALTER TABLE u ADD INDEX (x)"))
    assert history.last_position == pos(600)
    assert history.at(U, pos(700)).version == 0
    assert len(history.to_dict()["tables"][1]["versions"]) == 1


def test_gc_keeps_the_version_in_force_at_the_checkpoint() -> None:
    h = SchemaHistory.initial({T: table(T, "a"), U: table(U, "x")}, pos(100))
    h.apply(ddl(200, "ALTER TABLE t ADD b INT"))
    h.apply(ddl(300, "ALTER TABLE t ADD c INT"))
    h.apply(ddl(400, "ALTER TABLE t ADD d INT"))
    assert h.gc(pos(300)) == 1  # v0 goes; v1 is in force at 300 (the DDL at 300 is after it)
    assert h.horizon == pos(300)
    assert h.at(T, pos(300)).column_names == ("a", "b")
    assert h.at(T, pos(301)).column_names == ("a", "b", "c")
    assert h.at(U, pos(300)).column_names == ("x",)
    with pytest.raises(ValueError, match="horizon"):
        h.at(T, pos(250))
    assert h.gc(pos(350)) == 1
    assert h.at(T, pos(350)).column_names == ("a", "b", "c")
    assert h.gc(pos(200)) == 0
    assert h.horizon == pos(350)


def test_gc_forgets_tables_dropped_before_the_checkpoint(history: SchemaHistory) -> None:
    assert history.gc(pos(301)) == 3
    assert history.to_dict()["tables"] == []
    assert history.at(T, pos(400)) is None
    history.apply(ddl(500, "CREATE TABLE t (z INT)"))
    assert history.current(T).column_names == ("z",)


def test_gc_leaves_tables_created_after_the_checkpoint(history: SchemaHistory) -> None:
    history.apply(ddl(400, "CREATE TABLE u (x INT)"))
    history.gc(pos(350))
    assert history.at(U, pos(401)).column_names == ("x",)
    assert history.at(U, pos(360)) is None


def test_apply_after_gc_at_the_barrier() -> None:
    h = SchemaHistory.initial({T: table(T, "a")}, pos(100))
    h.gc(pos(200))  # checkpoint reached the DDL at 200 before it was applied
    h.apply(ddl(200, "ALTER TABLE t ADD b INT"))
    assert h.at(T, pos(200)).column_names == ("a",)
    assert h.at(T, pos(201)).column_names == ("a", "b")


def test_round_trip_through_json(history: SchemaHistory) -> None:
    history.apply(ddl(400, "CREATE TABLE u (x INT, y ENUM('a','b'))"))
    history.gc(pos(150))
    text = json.dumps(history.to_dict())
    copy = SchemaHistory.from_dict(json.loads(text))
    assert copy.to_dict() == history.to_dict()
    assert copy.horizon == history.horizon
    assert copy.last_position == history.last_position
    assert copy.flavor is history.flavor
    for p in (150, 200, 201, 300, 301, 401):
        for name in (T, U):
            assert copy.at(name, pos(p)) == history.at(name, pos(p))
    with pytest.raises(ValueError, match="not after"):
        copy.apply(ddl(400, "DROP TABLE u"))


def test_round_trip_keeps_gtid_and_flavor() -> None:
    start = Position("binlog.000001", 4, GtidSet.parse("0-1-10"))
    h = SchemaHistory.initial({T: table(T, "a")}, start, flavor=Flavor.MYSQL)
    h.apply(parse_ddl("ALTER TABLE t ADD b INT", "db", pos(10, "binlog.000001")))
    copy = SchemaHistory.from_dict(h.to_dict())
    assert copy.horizon == start
    assert copy.flavor is Flavor.MYSQL
    assert copy.current(T).column("b").column_type == "int"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(v=2), "format version 2"),
        (lambda d: d.pop("tables"), "lacks tables"),
        (lambda d: d.update(flavor="oracle"), "unknown flavor 'oracle'"),
        (lambda d: d["tables"][0]["versions"].reverse(), "out of order"),
        (lambda d: d["tables"][0]["versions"][0]["schema"].update(v=9), "format version"),
        (lambda d: d["tables"][0].update(name={"schema": "db", "table": "zz"}), "is named"),
    ],
)
def test_from_dict_rejects_bad_data(history: SchemaHistory, mutate, message: str) -> None:
    data = json.loads(json.dumps(history.to_dict()))
    mutate(data)
    with pytest.raises(ValueError, match=message):
        SchemaHistory.from_dict(data)


def test_from_dict_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        SchemaHistory.from_dict([])  # type: ignore[arg-type]


def test_initial_checks_its_input() -> None:
    with pytest.raises(ValueError, match="named db.u"):
        SchemaHistory.initial({U: table(T, "a")}, pos(1))
    with pytest.raises(TypeError, match="Position"):
        SchemaHistory.initial({}, "binlog.000001:4")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DdlEvent"):
        SchemaHistory.initial({}, pos(1)).apply("DROP TABLE t")  # type: ignore[arg-type]


def test_mariadb_flavor_spelling_by_default() -> None:
    h = SchemaHistory.initial({}, pos(1))
    h.apply(ddl(2, "CREATE TABLE t (a INT)"))
    assert h.current(T).column("a").column_type == "int(11)"
    assert h.flavor is Flavor.MARIADB
    event = ddl(3, "ALTER TABLE t ADD b INT")
    assert event.kind is DdlKind.ADD_COLUMN
