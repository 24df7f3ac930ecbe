"""FileSink on a real folder: layout, rolling by size and time, atomic files, metadata
only after the data, crash repair on reopen, DDL versions, and its refusals."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.model import (
    Column,
    DdlEvent,
    DdlKind,
    Op,
    Position,
    RowChange,
    TableName,
    TableSchema,
)
from cdc.sink.base import SinkError
from cdc.sink.file import FileSink, FileSinkReader, read_changes
from cdc.sink.file.layout import DATA_FILE, is_temp
from cdc.sink.file.snapshot_files import write_chunk
from cdc.sink.file.uri import FileProtocol, FileSinkURI
from cdc.sink.kind import DownstreamTableMismatch
from cdc.sink.registry import kind_of, parse_sink_uri

T = TableName("shop", "orders")
ID = Column("id", "int", "int(11)", nullable=False)
NOTE = Column("note", "varchar", "varchar(200)", charset="utf8mb4")
V0 = TableSchema(T, (ID, NOTE), ("id",), version=0)
V1 = TableSchema(T, (ID, NOTE, Column("qty", "int", "int(11)")), ("id",), version=1)


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def insert(i: int, offset: int, note: str = "x", table: TableName = T) -> RowChange:
    return RowChange(table, Op.CREATE, None, {"id": i, "note": note}, (i,), pos(offset))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["canal-json", "csv"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


def make_uri(root: Path, protocol: str = "canal-json", **params: str) -> FileSinkURI:
    query = "&".join(f"{k}={v}" for k, v in {"protocol": protocol, **params}.items())
    uri = parse_sink_uri(f"file://{root}?{query}")
    assert isinstance(uri, FileSinkURI)
    return uri


def lookup(schemas: dict[TableName, TableSchema]) -> Callable[[TableName], TableSchema]:
    return lambda table: schemas[table]


@pytest.fixture
def sinks() -> Iterator[list[FileSink]]:
    opened: list[FileSink] = []
    yield opened
    for sink in opened:
        sink.close()


def open_sink(sinks: list[FileSink], uri: FileSinkURI, schemas: Any = None, **kw: Any) -> FileSink:
    sink = FileSink(uri, schemas or lookup({T: V0}), "cf-1", **kw)
    sinks.append(sink)
    return sink


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def data_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if DATA_FILE.fullmatch(p.name))


def metadata(root: Path) -> dict[str, Any]:
    return json.loads((root / "metadata").read_text())


def test_layout_and_read_back(tmp_path: Path, protocol: str, sinks: list[FileSink]) -> None:
    sink = open_sink(sinks, make_uri(tmp_path, protocol))
    changes = [insert(1, 100, "a"), insert(2, 100, "b"), insert(3, 200, "c")]
    sink.write_rows(changes)
    assert sink.flush() == pos(200)
    ext = "json" if protocol == "canal-json" else "csv"
    assert files(tmp_path) == [
        ".lock",
        "metadata",
        f"shop/orders/0/CDC00000001.{ext}",
        "shop/orders/0/schema.json",
    ]
    meta = metadata(tmp_path)
    assert meta["v"] == 1 and meta["changefeed"] == "cf-1" and meta["protocol"] == protocol
    assert Position.from_dict(meta["checkpoint"]) == pos(200)
    schema_file = json.loads((tmp_path / "shop/orders/0/schema.json").read_text())
    assert TableSchema.from_dict(schema_file["table"]) == V0 and schema_file["ddl"] is None
    assert list(read_changes(tmp_path)) == changes


def test_nothing_is_visible_or_claimed_before_flush(tmp_path: Path, sinks: list[FileSink]) -> None:
    sink = open_sink(sinks, make_uri(tmp_path))
    sink.write_rows([insert(1, 100)])
    assert sink.flushed is None
    assert data_files(tmp_path) == []
    temps = [p.name for p in tmp_path.rglob("*") if is_temp(p.name)]
    assert temps == [".CDC00000001.json.tmp"]
    assert metadata(tmp_path)["checkpoint"] is None
    assert list(read_changes(tmp_path)) == []
    sink.flush()
    assert sink.flushed == pos(100)
    assert [p.name for p in tmp_path.rglob("*") if is_temp(p.name)] == []


def test_roll_by_size_never_splits_a_transaction(
    tmp_path: Path, protocol: str, sinks: list[FileSink]
) -> None:
    sink = open_sink(sinks, make_uri(tmp_path, protocol, **{"file-size": "1KiB"}))
    # 20 transactions of 5 rows, ~100 bytes of note each: ~10 KB in all
    changes = [insert(t * 5 + r, 1000 + t, "n" * 100) for t in range(20) for r in range(5)]
    sink.write_rows(changes)
    sink.flush()
    found = data_files(tmp_path)
    assert len(found) >= 5
    reader = FileSinkReader(tmp_path)
    seen_positions: set[int] = set()
    for path in found[:-1]:
        with open(path, "rb") as handle:
            records = list(reader.codec.records(handle, str(path)))
        offsets = {r.position.offset for r in records}
        assert not offsets & seen_positions, f"{path.name} repeats a transaction of another file"
        seen_positions |= offsets
        # closed at the first transaction boundary once the size was reached
        last_txn = sum(len(r.raw) for r in records if r.position == records[-1].position)
        assert path.stat().st_size - last_txn < 1024 <= path.stat().st_size
    assert list(read_changes(tmp_path)) == changes


def test_one_huge_transaction_stays_in_one_file(tmp_path: Path, sinks: list[FileSink]) -> None:
    sink = open_sink(sinks, make_uri(tmp_path, **{"file-size": "1KiB"}))
    sink.write_rows([insert(i, 500, "n" * 100) for i in range(50)])
    sink.flush()
    assert len(data_files(tmp_path)) == 1


def test_flush_interval_flushes_at_the_next_transaction_boundary(
    tmp_path: Path, sinks: list[FileSink]
) -> None:
    clock = Clock()
    sink = open_sink(sinks, make_uri(tmp_path, **{"flush-interval": "5s"}), clock=clock)
    sink.write_rows([insert(1, 100), insert(2, 100)])
    clock.now += 6
    sink.write_rows([insert(3, 100)])  # same transaction: no flush in the middle of it
    assert sink.flushed is None and data_files(tmp_path) == []
    sink.write_rows([insert(4, 200)])  # a new position: the interval has passed
    assert sink.flushed == pos(100)
    assert len(data_files(tmp_path)) == 1
    assert Position.from_dict(metadata(tmp_path)["checkpoint"]) == pos(100)
    clock.now += 1
    sink.write_rows([insert(5, 300)])
    assert sink.flushed == pos(100)
    assert [c.after["id"] for c in read_changes(tmp_path)] == [1, 2, 3]


def test_metadata_is_renamed_after_the_data_it_covers(
    tmp_path: Path, sinks: list[FileSink], monkeypatch: pytest.MonkeyPatch
) -> None:
    schemas = {T: V0, TableName("shop", "b"): TableSchema(TableName("shop", "b"), (ID, NOTE), ())}
    sink = open_sink(sinks, make_uri(tmp_path), lookup(schemas))
    renames: list[str] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        renames.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    sink.write_rows([insert(1, 100), insert(2, 200, table=TableName("shop", "b"))])
    sink.flush()
    assert sorted(renames) == [
        "CDC00000001.json",
        "CDC00000001.json",
        "metadata",
        "schema.json",
        "schema.json",
    ]
    data_renames = [i for i, name in enumerate(renames) if DATA_FILE.fullmatch(name)]
    assert len(data_renames) == 2
    assert renames[-1] == "metadata" and max(data_renames) < len(renames) - 1


def crash_after(
    root: Path,
    protocol: str,
    work: Callable[[FileSink], None],
    schemas: dict[TableName, TableSchema] | None = None,
) -> None:
    """Runs ``work`` on a sink in a child process that then dies without any cleanup."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            sink = FileSink(
                make_uri(root, protocol, **{"file-size": "1KiB"}),
                lookup(schemas or {T: V0}),
                "cf-1",
            )
            work(sink)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_reopen_after_crash_keeps_each_change_once(
    tmp_path: Path, protocol: str, sinks: list[FileSink]
) -> None:
    changes = [insert(i, 1000 + i, "n" * 120) for i in range(40)]

    def work(sink: FileSink) -> None:
        sink.write_rows(changes[:10])
        sink.flush()  # checkpoint at change 9
        sink.write_rows(changes[10:30])  # size rolls finish files past the checkpoint

    crash_after(tmp_path, protocol, work)
    assert Position.from_dict(metadata(tmp_path)["checkpoint"]) == changes[9].position
    assert any(is_temp(p.name) for p in tmp_path.rglob("*"))
    past = [c for c in FileSinkReader(tmp_path).table_changes(T, pos(10**9))]
    assert len(past) > 10  # finished files hold changes past the checkpoint
    assert list(read_changes(tmp_path)) == changes[:10]

    sink = open_sink(sinks, make_uri(tmp_path, protocol, **{"file-size": "1KiB"}))
    assert sink.flushed == changes[9].position
    assert not any(is_temp(p.name) for p in tmp_path.rglob("*"))
    assert list(FileSinkReader(tmp_path).table_changes(T, pos(10**9))) == changes[:10]
    sink.write_rows(changes)  # the changefeed replays from an older checkpoint: all again
    sink.flush()
    assert list(read_changes(tmp_path)) == changes


B = TableName("shop", "late")
B0 = TableSchema(B, (ID, NOTE), ("id",), version=0)


def test_a_table_behind_the_others_keeps_its_own_checkpoint(
    tmp_path: Path, protocol: str, sinks: list[FileSink]
) -> None:
    """A table that joined late (a catch-up reader behind the main one) hands in rows at
    positions the other tables passed long ago. Its checkpoint is its own: after a crash
    its files are cut at its position, not at the others', and its rows sent again from
    there are written, not dropped as already there (one checkpoint per folder dropped
    them: rows lost)."""
    schemas = {T: V0, B: B0}
    main = [insert(i, 1000 + 10 * i, "m" * 120) for i in range(10)]
    behind = [insert(i, 1005 + 10 * i, "b" * 120, table=B) for i in range(10)]

    def work(sink: FileSink) -> None:
        sink.write_rows(main)  # the main reader, at 1090
        sink.write_rows(behind[:4])  # the catch-up reader, at 1035
        sink.flush()
        sink.write_rows(behind[4:8])  # size rolls finish files past B's checkpoint

    crash_after(tmp_path, protocol, work, schemas)
    tables = metadata(tmp_path)["tables"]
    assert Position.from_dict(tables[str(T)]) == main[-1].position
    assert Position.from_dict(tables[str(B)]) == behind[3].position
    assert [c.table for c in read_changes(tmp_path)].count(B) == 4

    sink = open_sink(sinks, make_uri(tmp_path, protocol, **{"file-size": "1KiB"}), lookup(schemas))
    assert list(FileSinkReader(tmp_path).table_changes(B, pos(10**9))) == behind[:4]
    sink.write_rows(behind)  # B restarts from an older checkpoint: sent again from its start
    sink.write_rows(main[5:])  # so does T, elsewhere in the binlog
    sink.flush()
    got = list(read_changes(tmp_path))
    assert [c for c in got if c.table == B] == behind
    assert [c for c in got if c.table == T] == main


def test_the_owner_records_a_ddl_beside_the_sink_that_holds_the_folder(
    tmp_path: Path, sinks: list[FileSink]
) -> None:
    """The owner applies a DDL once every table reached it, while a capture's sink holds the
    folder's lock: the DDL file needs no lock, and reopening the folder keeps it although no
    table's checkpoint reached it yet."""
    uri = make_uri(tmp_path)
    sink = open_sink(sinks, uri)
    sink.write_rows([insert(1, 100)])
    sink.flush()
    ddl = DdlEvent(pos(150), "shop", (T,), DdlKind.ADD_COLUMN, "ALTER TABLE orders ADD qty int")
    kind_of(uri).apply_ddl(uri, ddl, "cf-1")
    kind_of(uri).apply_ddl(uri, ddl, "cf-1")  # an owner that died before recording it: again
    with pytest.raises(SinkError, match="another file sink is writing to this folder"):
        FileSink(uri, lookup({T: V0}), "cf-1")
    sink.close()
    reopened = open_sink(sinks, uri)
    assert list(read_changes(tmp_path)) == [insert(1, 100), ddl]
    reopened.close()


def test_crash_before_the_first_flush_leaves_no_data(tmp_path: Path, sinks: list[FileSink]) -> None:
    crash_after(
        tmp_path, "csv", lambda s: s.write_rows([insert(i, 100 + i, "n" * 200) for i in range(20)])
    )
    assert data_files(tmp_path)
    sink = open_sink(sinks, make_uri(tmp_path, "csv"))
    assert sink.flushed is None
    assert data_files(tmp_path) == [] and not (tmp_path / "shop").exists()


def test_ddl_is_recorded_in_order_and_starts_a_version(
    tmp_path: Path, protocol: str, sinks: list[FileSink]
) -> None:
    schemas = {T: V0}
    sink = open_sink(sinks, make_uri(tmp_path, protocol), lookup(schemas))
    sink.write_rows([insert(1, 100)])
    ddl = DdlEvent(pos(150), "shop", (T,), DdlKind.ADD_COLUMN, "ALTER TABLE orders ADD qty int")
    sink.apply_ddl(ddl)
    assert sink.flushed == pos(150)
    assert Position.from_dict(metadata(tmp_path)["checkpoint"]) == pos(150)
    schemas[T] = V1
    late = RowChange(T, Op.CREATE, None, {"id": 2, "note": "y", "qty": 3}, (2,), pos(200))
    sink.write_rows([late])
    sink.flush()
    assert (tmp_path / "ddl" / "binlog.000001-00000000000000000150.json").is_file()
    v1 = json.loads((tmp_path / "shop/orders/1/schema.json").read_text())
    assert v1["ddl"]["statement"] == "ALTER TABLE orders ADD qty int"
    assert TableSchema.from_dict(v1["table"]) == V1
    got = list(read_changes(tmp_path))
    assert got[0] == insert(1, 100) and got[1] == ddl
    assert got[2].after == late.after and got[2].schema_version == 1


def test_reader_stops_at_the_checkpoint(tmp_path: Path, sinks: list[FileSink]) -> None:
    sink = open_sink(sinks, make_uri(tmp_path, **{"file-size": "1KiB"}))
    sink.write_rows([insert(i, 100 + i, "n" * 300) for i in range(10)])
    sink.flush()
    sink.write_rows([insert(i, 100 + i, "n" * 300) for i in range(10, 20)])
    assert len(list(read_changes(tmp_path))) == 10
    assert len(list(read_changes(tmp_path, through=pos(10**9)))) > 10


def test_names_that_need_escaping(tmp_path: Path, sinks: list[FileSink]) -> None:
    odd = TableName("ddl", "a/b.%c")
    schemas = {odd: TableSchema(odd, (ID, NOTE), ("id",)), T: V0}
    meta_table = TableName("metadata", ".hidden")
    schemas[meta_table] = TableSchema(meta_table, (ID, NOTE), ("id",))
    sink = open_sink(sinks, make_uri(tmp_path), lookup(schemas))
    sink.write_rows([insert(1, 100, table=odd), insert(2, 200, table=meta_table)])
    sink.flush()
    assert (tmp_path / "%64dl" / "a%2Fb.%25c" / "0" / "CDC00000001.json").is_file()
    assert (tmp_path / "%6Detadata" / "%2Ehidden" / "0").is_dir()
    assert [c.table for c in read_changes(tmp_path)] == [odd, meta_table]


def test_refusals(tmp_path: Path, sinks: list[FileSink]) -> None:
    # parse_sink_uri refuses it; a URI built by hand still meets the sink's own check
    with pytest.raises(SinkError, match="protocol=parquet yet"):
        FileSink(FileSinkURI(str(tmp_path / "p"), FileProtocol.PARQUET), lookup({}), "cf-1")
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(SinkError, match="notes.txt but no metadata"):
        FileSink(make_uri(stranger), lookup({}), "cf-1")
    with pytest.raises(SinkError, match="non-empty string"):
        FileSink(make_uri(tmp_path / "x"), lookup({}), " ")

    root = tmp_path / "root"
    sink = open_sink(sinks, make_uri(root))
    with pytest.raises(SinkError, match="another file sink is writing"):
        FileSink(make_uri(root), lookup({T: V0}), "cf-1")
    with pytest.raises(SinkError, match="no schema for shop.other"):
        sink.write_rows([insert(1, 100, table=TableName("shop", "other"))])
    bad = RowChange(T, Op.CREATE, None, {"id": 1}, (1,), pos(100))
    with pytest.raises(SinkError, match=r"missing columns \['note'\]"):
        sink.write_rows([bad])
    with pytest.raises(SinkError, match="holds int"):
        sink.write_rows([RowChange(T, Op.CREATE, None, {"id": 1, "note": 5}, (1,), pos(100))])
    assert sink.flush() is None  # a refused change is never claimed
    with pytest.raises(SinkError, match="RowChange values, not str"):
        sink.write_rows(["row"])  # type: ignore[list-item]
    sink.close()
    with pytest.raises(SinkError, match="closed"):
        sink.flush()

    with pytest.raises(SinkError, match="belongs to changefeed 'cf-1', not 'cf-2'"):
        FileSink(make_uri(root), lookup({}), "cf-2")
    with pytest.raises(SinkError, match="holds protocol=canal-json files.*protocol=csv"):
        FileSink(make_uri(root, "csv"), lookup({}), "cf-1")


def test_one_version_number_must_name_one_shape(tmp_path: Path, sinks: list[FileSink]) -> None:
    schemas = {T: V0}
    sink = open_sink(sinks, make_uri(tmp_path), lookup(schemas))
    sink.write_rows([insert(1, 100)])
    sink.flush()
    sink.close()
    schemas[T] = TableSchema(T, V1.columns, ("id",), version=0)
    sink = open_sink(sinks, make_uri(tmp_path), lookup(schemas))
    row = RowChange(T, Op.CREATE, None, {"id": 2, "note": "y", "qty": 3}, (2,), pos(200))
    with pytest.raises(SinkError, match="schema version 0 of shop.orders differs"):
        sink.write_rows([row])


def test_a_table_added_back_with_backfill_is_refused_while_the_folder_holds_its_files(
    tmp_path: Path, sinks: list[FileSink]
) -> None:
    """A replay applies every file of a table, then the new snapshot's rows by key: a row
    deleted while an update had removed the table would stay. So a tables update adding
    with backfill a table whose files (changes, or snapshot chunks) the folder holds is
    refused (``check_existing``), naming the folders to move away."""
    uri = make_uri(tmp_path / "root")
    kind = kind_of(uri)
    refunds = TableName("shop", "refunds")
    other = TableSchema(refunds, (ID, NOTE), ("id",))
    kind.check_existing(uri, [V0, other])  # a folder not created yet holds nothing
    sink = open_sink(sinks, uri)
    sink.write_rows([insert(1, 100)])
    sink.flush()
    with pytest.raises(DownstreamTableMismatch) as refused:
        kind.check_existing(uri, [other, V0])
    message = str(refused.value)
    assert "already holds files of shop.orders" in message and "refunds" not in message
    assert str(tmp_path / "root" / "shop" / "orders") in message
    assert "Move those folders" in message and "without backfill" in message
    kind.check_existing(uri, [other])
    read = RowChange(refunds, Op.READ, None, {"id": 1, "note": "r"}, (1,), pos(50))
    write_chunk(uri, other, "0", [read])
    with pytest.raises(DownstreamTableMismatch, match=r"files of shop\.refunds \(\S+/snapshot/"):
        kind.check_existing(uri, [other])
