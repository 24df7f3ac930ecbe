"""The MySQL sink applied to long random streams converges to the source's state.

The issue's check: 100k random inserts / updates / deletes over 10k keys (with
primary-key-changing updates), generated deterministically and applied to an
in-memory model for the expected state, written with worker-count 1 and 8: the
downstream table equals the model row for row, and ``CHECKSUM TABLE`` equals
that of a table loaded with the expected rows directly.

A second stream exercises what lanes make hard: a secondary unique key whose
values move between rows, and a case-insensitive text primary key whose
updates change only case or trailing spaces.
"""

from __future__ import annotations

import random
import string
import time
from collections.abc import Iterator
from typing import Any

import pytest
from testkit import execute

from cdc.model import Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.mysql import MySQLSink
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

KEYS = 10_000
OPS = 100_000
BATCH = 700  # write_rows calls cut across transactions on purpose
TEXT = string.ascii_letters + string.digits + " '\"\\%_\n\té€😀"
T_DDL = (
    "CREATE TABLE {name} (id INT PRIMARY KEY, k INT NULL, c VARCHAR(40) NOT NULL, "
    "pad CHAR(20) NOT NULL, KEY k_1 (k)) DEFAULT CHARSET=utf8mb4"
)


class Stream:
    """Transactions of 1-4 changes, each transaction one shared Position object."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.changes: list[RowChange] = []
        self._txn = 0
        self._left = 0
        self._position: Position | None = None

    def position(self) -> tuple[Position, str]:
        if self._left == 0:
            self._txn += 1
            self._left = self.rng.randint(1, 4)
            self._position = Position("binlog.000001", 4 + self._txn * 100)
        self._left -= 1
        assert self._position is not None
        return self._position, f"0-1-{self._txn}"

    def add(self, table: TableName, op: Op, before: Any, after: Any, key: tuple) -> None:
        position, txn = self.position()
        self.changes.append(RowChange(table, op, before, after, key, position, txn))


def _text(rng: random.Random, low: int, high: int, alphabet: str = TEXT) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def random_stream(table: TableName, seed: int, ops: int, keys: int) -> tuple[Stream, dict]:
    """Random changes of table ``t`` and the rows they leave, keyed by id."""
    stream = Stream(seed)
    rng = stream.rng
    model: dict[int, dict[str, Any]] = {}

    def new_row(key: int) -> dict[str, Any]:
        return {
            "id": key,
            "k": None if rng.random() < 0.1 else rng.randint(-(2**31), 2**31 - 1),
            "c": _text(rng, 0, 40),
            "pad": _text(rng, 0, 20, string.ascii_letters),
        }

    for _ in range(ops):
        key = rng.randint(1, keys)
        row = model.get(key)
        if row is None:
            model[key] = after = new_row(key)
            stream.add(table, Op.CREATE, None, after, (key,))
            continue
        roll = rng.random()
        if roll < 0.55:
            after = {**new_row(key), "id": key}
            stream.add(table, Op.UPDATE, row, after, (key,))
            model[key] = after
        elif roll < 0.7:
            target = rng.randint(1, keys)
            while target in model:
                target = rng.randint(1, keys)
            after = {**row, "id": target, "k": rng.randint(0, 9)}
            stream.add(table, Op.UPDATE, row, after, (target,))
            del model[key]
            model[target] = after
        else:
            stream.add(table, Op.DELETE, row, None, (key,))
            del model[key]
    return stream, model


def run_sink(server: MariaDBServer, schemas: dict, changes: list[RowChange], query: str) -> Any:
    uri = parse_sink_uri(server.uri + query)
    sink = MySQLSink(uri, schemas.__getitem__, "stream-test")
    try:
        for start in range(0, len(changes), BATCH):
            sink.write_rows(changes[start : start + BATCH])
        flushed = sink.flush()
    finally:
        sink.close()
    return flushed


def com_load(server: MariaDBServer) -> int:
    """LOAD DATA statements the downstream has run since it started."""
    ((_, value),) = execute(server, "SHOW GLOBAL STATUS LIKE 'Com_load'")
    return int(value)


def fetch(server: MariaDBServer, sql: str) -> list[tuple]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def schema_of(server: MariaDBServer, table: TableName) -> TableSchema:
    conn = server.connect()
    try:
        return load_table_schema(conn, table)
    finally:
        conn.close()


def assert_rows(actual: list[tuple], expected: list[tuple], what: str) -> None:
    if actual == expected:
        return
    have, want = set(actual), set(expected)
    raise AssertionError(
        f"{what}: {len(actual)} rows downstream, {len(expected)} expected; "
        f"{len(want - have)} missing or different, e.g. {sorted(want - have, key=repr)[:3]}; "
        f"{len(have - want)} unexpected, e.g. {sorted(have - want, key=repr)[:3]}"
    )


@pytest.fixture(scope="module")
def big_stream() -> tuple[list[RowChange], dict[int, dict[str, Any]]]:
    stream, model = random_stream(TableName("placeholder", "t"), seed=20240531, ops=OPS, keys=KEYS)
    return stream.changes, model


def _retarget(changes: list[RowChange], table: TableName) -> Iterator[RowChange]:
    for change in changes:
        yield RowChange(
            table,
            change.op,
            change.before,
            change.after,
            change.key,
            change.position,
            change.txn_id,
        )


@pytest.mark.parametrize(
    ("workers", "load_rows"), [(1, 0), (8, 0), (8, 16)], ids=["1", "8", "8-load-data"]
)
def test_100k_random_changes_converge_with_any_worker_count(
    sink_db: MariaDBServer, sink_database: str, big_stream: tuple, workers: int, load_rows: int
) -> None:
    changes, model = big_stream
    table = TableName(sink_database, "t")
    execute(
        sink_db,
        T_DDL.format(name=table.quoted()),
        T_DDL.format(name=TableName(sink_database, "t_expected").quoted()),
    )
    changes = list(_retarget(changes, table))
    ops = {op: sum(1 for c in changes if c.op is op) for op in Op}
    key_changes = sum(1 for c in changes if c.op is Op.UPDATE and c.before["id"] != c.after["id"])
    assert ops[Op.CREATE] > 10_000 and ops[Op.DELETE] > 10_000 and key_changes > 5_000

    began = time.monotonic()
    loads = com_load(sink_db)
    flushed = run_sink(
        sink_db,
        {table: schema_of(sink_db, table)},
        changes,
        f"?worker-count={workers}&load-data-rows={load_rows}",
    )
    elapsed = time.monotonic() - began
    assert flushed == changes[-1].position
    assert (com_load(sink_db) > loads) is (load_rows > 0)

    expected = [tuple(model[k][c] for c in ("id", "k", "c", "pad")) for k in sorted(model)]
    actual = fetch(sink_db, f"SELECT id, k, c, pad FROM {table.quoted()} ORDER BY id")
    assert_rows(actual, expected, f"worker-count={workers}")
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {TableName(sink_database, 't_expected').quoted()} "
                "(id, k, c, pad) VALUES (%s, %s, %s, %s)",
                expected,
            )
            cur.execute(f"CHECKSUM TABLE {table.quoted()}, `{sink_database}`.`t_expected`")
            (_, got), (_, want) = cur.fetchall()
    finally:
        conn.close()
    assert got == want and got is not None
    print(f"worker-count={workers}: {len(changes)} changes in {elapsed:.1f}s")


U_DDL = (
    "CREATE TABLE {name} (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, v INT NOT NULL, "
    "UNIQUE KEY email (email)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)
N_DDL = (
    "CREATE TABLE {name} (name VARCHAR(20) NOT NULL PRIMARY KEY, v INT NOT NULL) "
    "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)


def spelling(rng: random.Random, base: str) -> str:
    """A random case and trailing-space variant: one row under utf8mb4_general_ci."""
    text = "".join(c.upper() if rng.random() < 0.5 else c for c in base)
    return text + " " * rng.randint(0, 2)


def unique_and_collation_stream(u: TableName, n: TableName, seed: int, ops: int) -> tuple:
    stream = Stream(seed)
    rng = stream.rng
    users: dict[int, dict[str, Any]] = {}
    names: dict[str, dict[str, Any]] = {}  # folded name -> row

    def free_email() -> str:
        taken = {row["email"].lower() for row in users.values()}
        while True:
            email = f"user{rng.randint(1, 400)}@example.com"
            if email not in taken:
                return spelling(rng, email).rstrip(" ")

    for _ in range(ops):
        if rng.random() < 0.5:
            key = rng.randint(1, 300)
            row = users.get(key)
            roll = rng.random()
            if row is None:
                users[key] = after = {"id": key, "email": free_email(), "v": rng.randint(0, 99)}
                stream.add(u, Op.CREATE, None, after, (key,))
            elif roll < 0.4:  # the unique value moves to another value
                after = {**row, "email": free_email()}
                stream.add(u, Op.UPDATE, row, after, (key,))
                users[key] = after
            elif roll < 0.55:  # the primary key moves, the unique value stays
                target = rng.randint(1, 300)
                if target in users:
                    continue
                after = {**row, "id": target}
                stream.add(u, Op.UPDATE, row, after, (target,))
                del users[key]
                users[target] = after
            else:
                stream.add(u, Op.DELETE, row, None, (key,))
                del users[key]
        else:
            base = f"name{rng.randint(1, 500)}"
            row = names.get(base)
            roll = rng.random()
            if row is None:
                names[base] = after = {"name": spelling(rng, base), "v": rng.randint(0, 99)}
                stream.add(n, Op.CREATE, None, after, (after["name"],))
            elif roll < 0.45:  # the key changes only in case or trailing spaces
                after = {"name": spelling(rng, base), "v": rng.randint(0, 99)}
                stream.add(n, Op.UPDATE, row, after, (after["name"],))
                names[base] = after
            elif roll < 0.6:  # the key changes to another name
                other = f"name{rng.randint(1, 500)}"
                if other in names:
                    continue
                after = {"name": spelling(rng, other), "v": row["v"]}
                stream.add(n, Op.UPDATE, row, after, (after["name"],))
                del names[base]
                names[other] = after
            else:
                stream.add(n, Op.DELETE, row, None, (row["name"],))
                del names[base]
    return stream.changes, users, names


@pytest.mark.parametrize("load_rows", [0, 4], ids=["statements", "load-data"])
def test_moving_unique_values_and_collation_equal_keys_converge_in_parallel(
    sink_db: MariaDBServer, sink_database: str, load_rows: int
) -> None:
    u, n = TableName(sink_database, "u"), TableName(sink_database, "n")
    execute(sink_db, U_DDL.format(name=u.quoted()), N_DDL.format(name=n.quoted()))
    changes, users, names = unique_and_collation_stream(u, n, seed=7, ops=30_000)
    renames = sum(
        1
        for c in changes
        if c.table == n and c.op is Op.UPDATE and c.before["name"] != c.after["name"]
    )
    assert renames > 1000
    schemas = {u: schema_of(sink_db, u), n: schema_of(sink_db, n)}
    assert schemas[u].unique_keys == (("email",),)
    loads = com_load(sink_db)
    run_sink(
        sink_db, schemas, changes, f"?worker-count=8&max-txn-row=64&load-data-rows={load_rows}"
    )
    assert (com_load(sink_db) > loads) is (load_rows > 0)
    assert_rows(
        fetch(sink_db, f"SELECT id, email, v FROM {u.quoted()} ORDER BY id"),
        [(r["id"], r["email"], r["v"]) for _, r in sorted(users.items())],
        "table with a secondary unique key",
    )
    assert_rows(
        sorted(fetch(sink_db, f"SELECT name, v FROM {n.quoted()}")),
        sorted((r["name"], r["v"]) for r in names.values()),
        "table with a case-insensitive text key",
    )
