"""The file sink end to end: a real binlog (puller) into files, the files replayed into an
empty database on another server, and the rows compared with the source (canonical values
and a checksum per table). Then the same with the writer SIGKILLed in the middle of a file
and restarted from the checkpoint in its metadata.

Run as a script, this module is that writer (see ``_worker``).
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc import typeconv
from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.filter.table_filter import TableFilter
from cdc.model import Column, DdlEvent, Position, RowChange, TableName, TableSchema
from cdc.schema.history import SchemaHistory
from cdc.schema.loader import list_tables, load_schemas, load_table_schema
from cdc.sink.file import FileSink, FileSinkReader, replay_into
from cdc.sink.file.layout import DATA_FILE, is_temp
from cdc.sink.file.uri import FileSinkURI
from cdc.sink.registry import parse_sink_uri
from cdc.source.flavor import current_position, detect
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

# ENUM/SET labels stay below U+FFFF: the initial schemas come from information_schema,
# which prints 4-byte characters of labels as '?' (see cdc.typeconv), so a table rebuilt
# from them could not hold such a value.

Event = RowChange | DdlEvent | Resolved

TYPES_TABLE = """CREATE TABLE `{db}`.types (
  id int PRIMARY KEY, ti tinyint, biu bigint unsigned, d decimal(65,30), dn decimal(5,2) unsigned,
  f float, db double, dt date, dtm datetime(6), ts timestamp(3) NULL, tm time(6), y year,
  c char(10), v varchar(100), vl varchar(20) CHARACTER SET latin1, tx text, b binary(4),
  vb varbinary(10), bl blob, e enum('a','b','é'), s set('x','y','z'), bt bit(12), j json,
  g int AS (id * 2) VIRTUAL
)"""
OTHER_TABLES = (
    "CREATE TABLE `{db}`.composite (a int, b varchar(10), v int, PRIMARY KEY (a, b))",
    "CREATE TABLE `{db}`.ukey (code varchar(10) NOT NULL, v int, UNIQUE KEY (code))",
    "CREATE TABLE `{db}`.nokey (a int, b varchar(10))",
)
TYPE_ROWS = (
    "(1, -128, 18446744073709551615, -0.000000000000000000000000000001, 999.99, 0.1, 0.1, "
    "'0000-00-00', '2024-02-31 23:59:59.999999', '2038-01-19 03:14:07.999', '-838:59:59', 0, "
    "'😀a', 'é€\",\\n', 'é€\\x81', REPEAT('t', 3000), 'ab', x'00ff', x'00010203', 'é', "
    "'x,z', b'111111111111', '{\"k\": [1, 2.5]}')",
    "(2, 127, 0, 12345678901234567890.5, 0, -1.17549435e-38, 5e-324, '2024-00-15', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '00:00:00.000001', 2155, '', '', 'ÿ ', '', "
    "'', '', '', '', '', 0, 'null')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
)
TYPE_COLUMNS = "id, ti, biu, d, dn, f, db, dt, dtm, ts, tm, y, c, v, vl, tx, b, vb, bl, e, s, bt, j"


def workload(db: str) -> list[str]:
    """Inserts, updates (keys too), deletes, a multi-statement transaction and DDL:
    ALTER, CREATE, TRUNCATE, RENAME, DROP and re-CREATE, qualified and not."""
    q = f"`{db}`"
    return [
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES', SESSION time_zone = '+05:30'",
        f"INSERT INTO {q}.types ({TYPE_COLUMNS}) VALUES {', '.join(TYPE_ROWS)}",
        f"INSERT INTO {q}.composite VALUES (1, 'a', 1), (1, 'b', 2), (2, 'a', 3)",
        f"INSERT INTO {q}.ukey VALUES ('k1', 1), ('k2', 2)",
        f"INSERT INTO {q}.nokey VALUES (1, 'x'), (1, 'x'), (2, NULL)",
        "BEGIN",
        f"UPDATE {q}.types SET v = 'changed', f = 3.4e38, ts = '2000-02-29 12:34:56.789' "
        "WHERE id = 1",
        f"UPDATE {q}.composite SET b = 'z' WHERE a = 1 AND b = 'a'",
        f"DELETE FROM {q}.types WHERE id = 2",
        f"UPDATE {q}.ukey SET code = 'k9' WHERE code = 'k1'",
        f"UPDATE {q}.nokey SET b = 'y' WHERE a = 1 LIMIT 1",
        "COMMIT",
        f"ALTER TABLE {q}.types ADD COLUMN extra varchar(20) DEFAULT 'dflt'",
        f"INSERT INTO {q}.types (id, extra, s) VALUES (4, 'four', 'y')",
        f"UPDATE {q}.types SET id = 40, extra = NULL WHERE id = 3",
        f"USE {q}",
        "CREATE TABLE later (id int PRIMARY KEY, note text)",
        "INSERT INTO later VALUES (1, 'one'), (2, 'two')",
        "TRUNCATE TABLE composite",
        "INSERT INTO composite VALUES (5, 'e', 5)",
        f"RENAME TABLE {q}.later TO {q}.renamed",
        "UPDATE renamed SET note = 'uno' WHERE id = 1",
        "DELETE FROM nokey WHERE a = 2",
        "CREATE TABLE gone (id int PRIMARY KEY)",
        "INSERT INTO gone VALUES (1)",
        "DROP TABLE gone",
        "CREATE TABLE gone (k varchar(5) PRIMARY KEY, extra int)",
        "INSERT INTO gone VALUES ('k', 8)",
        *(f"INSERT INTO {q}.ukey VALUES ('n{i}', {i})" for i in range(60)),
        f"UPDATE {q}.ukey SET v = v + 1000 WHERE code LIKE 'n%'",
        f"DELETE FROM {q}.ukey WHERE v % 3 = 0",
    ]


def execute(conn: Any, statements: Sequence[str]) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@dataclass
class Capture:
    """What a changefeed would see: the start, the schemas there, and the events after it."""

    start: Position
    end: Position
    initial: dict[TableName, TableSchema]
    events: list[Event] = field(default_factory=list)


def pull(source_db: Any, db: str, start: Position, end: Position) -> list[Event]:
    conn = source_db.connect()
    try:
        info = detect(conn)
    finally:
        conn.close()
    puller = Puller(
        PullerConfig(
            source=parse_source_uri(source_db.uri),
            server=info,
            start=start,
            tables=TableFilter.parse([f"{db}.*"]),
            heartbeat_interval=0.3,
        )
    )
    events: list[Event] = []
    deadline = time.monotonic() + 60
    try:
        for event in puller.events():
            events.append(event)
            if isinstance(event, Resolved) and event.position.key() >= end.key():
                return events
            if time.monotonic() > deadline:
                pytest.fail(f"the binlog did not reach {end} within 60s; last event {event}")
    finally:
        puller.close()
    pytest.fail("the puller stopped before the end of the workload")


def capture(source_db: Any, db: str) -> Capture:
    conn = source_db.connect()
    try:
        info = detect(conn)
        execute(conn, [TYPES_TABLE.format(db=db), *(t.format(db=db) for t in OTHER_TABLES)])
        start = current_position(conn, info)
        initial = load_schemas(conn, list_tables(conn, lambda s, _t: s == db))
        execute(conn, workload(db))
        end = current_position(conn, info)
    finally:
        conn.close()
    return Capture(start, end, initial, pull(source_db, db, start, end))


class Feeder:
    """Drives a sink the way a changefeed does: schemas follow the DDL, and the owner
    applies a DDL to the sink before it records the new schema version."""

    def __init__(self, capture: Capture) -> None:
        self.history = SchemaHistory.initial(capture.initial, capture.start)

    def lookup(self, table: TableName) -> TableSchema:
        schema = self.history.current(table)
        if schema is None:
            raise LookupError(f"{table} does not exist in the schema history")
        return schema

    def feed(
        self,
        sink: FileSink,
        events: Sequence[Event],
        *,
        flush_every: int = 0,
        pause: float = 0.0,
        after: Callable[[int], None] | None = None,
    ) -> None:
        for n, event in enumerate(events, start=1):
            if isinstance(event, RowChange):
                sink.write_rows([event])
            elif isinstance(event, DdlEvent):
                sink.apply_ddl(event)
                self.history.apply(event)
            if flush_every and n % flush_every == 0:
                sink.flush()
            if after is not None:
                after(n)
            if pause:
                time.sleep(pause)
        sink.flush()


def in_order(changes: Iterator[Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    """Changes as comparable tuples, in position order and table by table within a
    position (the files keep each table's order, not the order across tables of one
    transaction). The schema version is left out: the puller does not stamp it."""
    result = []
    for change in changes:
        if isinstance(change, RowChange):
            result.append(
                (
                    change.position.key(),
                    str(change.table),
                    change.position,
                    change.op,
                    change.before,
                    change.after,
                    change.key,
                    change.txn_id,
                )
            )
        elif isinstance(change, DdlEvent):
            result.append((change.position.key(), "", change))
    return sorted(result, key=lambda item: item[:2])


def sink_uri(root: Path, protocol: str, **params: str) -> FileSinkURI:
    query = "&".join(f"{k}={v}" for k, v in {"protocol": protocol, **params}.items())
    uri = parse_sink_uri(f"file://{root}?{query}")
    assert isinstance(uri, FileSinkURI)
    return uri


# --- comparing the source with the replayed copy ------------------------------------------


def fingerprint(value: Any) -> Any:
    if isinstance(value, Decimal):
        return ("Decimal", str(value))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted(value)))
    if isinstance(value, datetime):
        return ("datetime", value.isoformat())
    return (type(value).__name__, value)


def canonical_rows(server: Any, table: TableName) -> list[tuple[Any, ...]]:
    """Every row as canonical values (the snapshot's reading), sorted."""
    conn = server.connect(database=table.schema, **typeconv.snapshot_connect_kwargs())
    try:
        columns = load_table_schema(conn, table).columns
        with conn.cursor() as cur:
            cur.execute(f"SELECT {typeconv.select_list(columns)} FROM `{table.table}`")
            convert = typeconv.row_converter(columns, "select")
            rows = [tuple(fingerprint(v) for v in convert(row)) for row in cur.fetchall()]
    finally:
        conn.close()
    names = tuple(c.name for c in columns)
    return [names, *sorted(rows, key=repr)]


def _checksum_expression(column: Column) -> str:
    name = f"`{column.name}`"
    if column.data_type == "float":
        text = f"CAST(CAST({name} AS DOUBLE) AS CHAR)"
    elif column.data_type == "bit":
        text = f"CAST({name} + 0 AS CHAR)"
    elif column.data_type in ("set", "enum") or column.charset is not None:
        text = f"HEX({name})"
    else:
        text = f"CAST({name} AS CHAR)"
    return f"IFNULL({text}, 'NULL')"


def checksum(server: Any, table: TableName) -> tuple[int, int]:
    """sync-diff style: row count and the XOR of a CRC32 per row, computed by the server."""
    conn = server.connect(database=table.schema)
    try:
        columns = load_table_schema(conn, table).columns
        parts = ", ".join(_checksum_expression(c) for c in columns)
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(
                f"SELECT COUNT(*), BIT_XOR(CRC32(CONCAT_WS('|', {parts}))) FROM `{table.table}`"
            )
            count, crc = cur.fetchone()
    finally:
        conn.close()
    return int(count), int(crc or 0)


def tables_of(server: Any, db: str) -> list[str]:
    conn = server.connect()
    try:
        return sorted(t.table for t in list_tables(conn, lambda s, _t: s == db))
    finally:
        conn.close()


def differences(source: list[tuple[Any, ...]], copy: list[tuple[Any, ...]]) -> list[Any]:
    """Column by column, where the copy's rows differ from the source's."""
    names = source[0]
    if copy[0] != names or len(copy) != len(source):
        return [("columns or row counts", source[0], copy[0], len(source), len(copy))]
    return [
        (names[i], want[i], got[i])
        for want, got in zip(source[1:], copy[1:], strict=True)
        for i in range(len(names))
        if want[i] != got[i]
    ]


def assert_same_tables(source_db: Any, db: str, sink_db: Any, copy: str) -> int:
    """The copy has the source's tables with the same rows; returns the rows compared."""
    names = tables_of(source_db, db)
    assert names == ["composite", "gone", "nokey", "renamed", "types", "ukey"]
    assert tables_of(sink_db, copy) == names
    compared = 0
    for name in names:
        source_rows = canonical_rows(source_db, TableName(db, name))
        copy_rows = canonical_rows(sink_db, TableName(copy, name))
        assert copy_rows == source_rows, (name, differences(source_rows, copy_rows))
        assert checksum(sink_db, TableName(copy, name)) == checksum(
            source_db, TableName(db, name)
        ), name
        compared += len(source_rows) - 1
    return compared


def replay(root: Path, sink_db: Any, db: str, copy: str) -> Any:
    conn = sink_db.connect(**typeconv.sink_connect_kwargs())
    try:
        return replay_into(root, conn, schema_map={db: copy})
    finally:
        conn.close()


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["canal-json", "csv"])
def test_replayed_files_equal_the_source(
    source_db: Any,
    source_database: str,
    sink_db: Any,
    sink_database: str,
    tmp_path: Path,
    protocol: str,
) -> None:
    cap = capture(source_db, source_database)
    rows = [e for e in cap.events if isinstance(e, RowChange)]
    ddl = [e for e in cap.events if isinstance(e, DdlEvent)]
    assert len(rows) > 80 and len(ddl) == 7

    root = tmp_path / "out"
    feeder = Feeder(cap)
    sink = FileSink(sink_uri(root, protocol, **{"file-size": "4KiB"}), feeder.lookup, "cf-it")
    try:
        feeder.feed(sink, cap.events, flush_every=25)
        assert sink.flushed is not None and sink.flushed.key() >= ddl[-1].position.key()
    finally:
        sink.close()

    reader = FileSinkReader(root)
    assert reader.checkpoint == sink.flushed
    assert reader.ddl_events(reader.checkpoint) == ddl
    altered = reader.versions[(TableName(source_database, "types"), 1)]
    assert altered.ddl is not None and "ADD COLUMN extra" in altered.ddl.statement
    assert reader.versions[(TableName(source_database, "types"), 0)].ddl is None
    assert in_order(reader.changes()) == in_order(cap.events)
    ext = "json" if protocol == "canal-json" else "csv"
    data = [p for p in root.rglob(f"*.{ext}") if DATA_FILE.fullmatch(p.name)]
    assert len(data) > 6  # rolled by size and per version

    stats = replay(root, sink_db, source_database, sink_database)
    assert stats.rows == len(rows)
    assert stats.ddl_applied == 7 and stats.ddl_skipped == 0
    compared = assert_same_tables(source_db, source_database, sink_db, sink_database)
    assert compared >= 50


def _worker(argv: list[str]) -> None:
    """The writer that gets killed. It feeds the captured events with a flush every 25;
    once a checkpoint exists, a file rolled by size after it is finished and another is
    open, it says so (``waiting``) and stops, mid-write, for the parent's SIGKILL."""
    capture_file, root, protocol, waiting = argv
    with open(capture_file, "rb") as handle:
        cap = Capture(**pickle.load(handle))
    feeder = Feeder(cap)
    sink = FileSink(sink_uri(Path(root), protocol, **{"file-size": "1KiB"}), feeder.lookup, "cf-c")

    def maybe_stop(n: int) -> None:
        if n >= 30 and _mid_write(Path(root)):
            Path(waiting).touch()
            time.sleep(600)

    feeder.feed(sink, cap.events, flush_every=25, after=maybe_stop)
    sink.close()


def _past_checkpoint(root: Path) -> list[RowChange]:
    """Row changes in finished files that the root's checkpoint does not cover."""
    reader = FileSinkReader(root)
    checkpoint = reader.checkpoint
    if checkpoint is None:
        return []
    far = Position(checkpoint.file, 2**62)
    return [
        change
        for table in reader.tables
        for change in reader.table_changes(table, far)
        if change.position.key() > checkpoint.key()
    ]


def _mid_write(root: Path) -> bool:
    """A checkpoint exists, a file rolled by size after it is finished, another is open."""
    writing = any(is_temp(p.name) and "CDC" in p.name for p in root.rglob("*"))
    return writing and bool(_past_checkpoint(root))


def _kill_when_waiting(waiting: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not waiting.exists():
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"the worker ended before it was killed ({proc.returncode}): {err!r}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the worker was never caught mid-write within 60s")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL


@pytest.mark.parametrize("protocol", ["canal-json", "csv"])
def test_killed_writer_restarts_from_its_checkpoint(
    source_db: Any,
    source_database: str,
    sink_db: Any,
    sink_database: str,
    tmp_path: Path,
    protocol: str,
) -> None:
    cap = capture(source_db, source_database)
    capture_file = tmp_path / "capture.pickle"
    capture_file.write_bytes(pickle.dumps(vars(cap)))
    root = tmp_path / "out"
    waiting = tmp_path / "waiting"
    proc = subprocess.Popen(
        [sys.executable, __file__, str(capture_file), str(root), protocol, str(waiting)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    _kill_when_waiting(waiting, proc)
    assert any(is_temp(p.name) for p in root.rglob("*"))  # a file was cut half written
    assert _past_checkpoint(root)  # and finished files hold changes past the checkpoint

    # Restart as a changefeed does: the schema history as it was at the checkpoint,
    # the binlog read again from the checkpoint.
    feeder = Feeder(cap)
    sink = FileSink(sink_uri(root, protocol, **{"file-size": "1KiB"}), feeder.lookup, "cf-c")
    try:
        checkpoint = sink.flushed
        assert checkpoint is not None and checkpoint.key() < cap.end.key()
        for event in cap.events:
            if isinstance(event, DdlEvent) and event.position.key() <= checkpoint.key():
                feeder.history.apply(event)
        assert not any(is_temp(p.name) for p in root.rglob("*"))
        assert _past_checkpoint(root) == []
        again = pull(source_db, source_database, checkpoint, cap.end)
        assert again and all(
            e.position.key() > checkpoint.key() for e in again if not isinstance(e, Resolved)
        )
        feeder.feed(sink, again)
    finally:
        sink.close()

    # Every change is in the files exactly once, in order.
    assert in_order(FileSinkReader(root).changes()) == in_order(cap.events)

    # Rebuilt with the example CLI this time.
    cli = Path(__file__).resolve().parents[3] / "examples" / "file_sink_reader.py"
    target = f"mysql://{sink_db.user}@{sink_db.host}:{sink_db.port}/?password-env=CDC_TEST_PW"
    done = subprocess.run(
        [sys.executable, str(cli), str(root), "--target", target]
        + ["--map", f"{source_database}={sink_database}"],
        capture_output=True,
        text=True,
        env={**os.environ, "CDC_TEST_PW": sink_db.password},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "165 row changes, 7 DDL applied (0 skipped)" in done.stdout, done.stdout
    assert sink_db.password not in done.stdout + done.stderr
    assert_same_tables(source_db, source_database, sink_db, sink_database)


if __name__ == "__main__":
    _worker(sys.argv[1:])
