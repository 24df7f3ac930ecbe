"""Crash idempotence: a sink killed between writing and recording its checkpoint, restarted
from the last recorded flushed position, converges to the same rows.

The writer runs in a child process (this file run as a script). It records the
flushed position to a checkpoint file every few batches. At batch ``--kill-after``
it flushes (rows durable) but records nothing, says WRITTEN and keeps writing;
the test then kills it with SIGKILL, so the downstream holds rows past the
checkpoint, some transactions possibly cut off mid-lane. A second run resumes
after the recorded checkpoint and replays. Table ``u`` has a secondary unique
key whose values move between rows, the case where a replay against a
downstream that is ahead must use REPLACE.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
import pytest

from cdc.model import Op, Position, RowChange, TableName
from cdc.schema.loader import load_table_schema
from cdc.sink.mysql import MySQLSink
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

URI_ENV = "CDC_TEST_SINK_URI"
SEED = 99
BATCH = 300
CHECKPOINT_EVERY = 10
KILL_AFTER = 45
T_DDL = "CREATE TABLE {name} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(30) NOT NULL)"
U_DDL = "CREATE TABLE {name} (id INT PRIMARY KEY, u INT NOT NULL, v INT NOT NULL, UNIQUE KEY u (u))"


def stream(database: str) -> list[RowChange]:
    """40k changes over tables t (2000 keys, primary key moves) and u (unique values move)."""
    rng = random.Random(SEED)
    t, u = TableName(database, "t"), TableName(database, "u")
    rows: dict[TableName, dict[int, dict[str, Any]]] = {t: {}, u: {}}
    changes: list[RowChange] = []
    for txn in range(1, 14_001):
        position = Position("binlog.000001", txn * 100)
        for _ in range(rng.randint(1, 5)):
            table = t if rng.random() < 0.6 else u
            model = rows[table]
            key = rng.randint(1, 2000 if table == t else 150)
            row = model.get(key)
            emit = _emitter(changes, table, position, str(txn))
            if table == u:
                used = {r["u"] for r in model.values()}
                free = [x for x in range(1, 200) if x not in used]
            if row is None:
                after = {"id": key, "v": rng.randint(0, 999)}
                after.update({"s": str(rng.random())} if table == t else {"u": rng.choice(free)})
                emit(Op.CREATE, None, after)
                model[key] = after
            elif rng.random() < 0.6:
                after = dict(row, v=rng.randint(0, 999))
                if table == u:
                    after["u"] = rng.choice(free)
                elif rng.random() < 0.3:
                    target = rng.randint(1, 2000)
                    if target not in model:
                        after["id"] = target
                emit(Op.UPDATE, row, after)
                del model[key]
                model[after["id"]] = after
            else:
                emit(Op.DELETE, row, None)
                del model[key]
    return changes


def _emitter(
    changes: list[RowChange], table: TableName, position: Position, txn: str
) -> Callable[[Op, Any, Any], None]:
    def emit(op: Op, before: Any, after: Any) -> None:
        image = after if after is not None else before
        changes.append(RowChange(table, op, before, after, (image["id"],), position, txn))

    return emit


def state(changes: list[RowChange]) -> dict[str, list[tuple]]:
    """The rows ``changes`` leave, per table name, sorted, as the test selects them."""
    rows: dict[str, dict[int, dict[str, Any]]] = {"t": {}, "u": {}}
    for change in changes:
        model = rows[change.table.table]
        if change.before is not None:
            del model[change.before["id"]]
        if change.after is not None:
            model[change.after["id"]] = change.after
    return {
        "t": [(r["id"], r["v"], r["s"]) for _, r in sorted(rows["t"].items())],
        "u": [(r["id"], r["u"], r["v"]) for _, r in sorted(rows["u"].items())],
    }


def downstream(conn: pymysql.connections.Connection, database: str) -> dict[str, list[tuple]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, v, s FROM `{database}`.t ORDER BY id")
        t = list(cur.fetchall())
        cur.execute(f"SELECT id, u, v FROM `{database}`.u ORDER BY id")
        u = list(cur.fetchall())
    return {"t": t, "u": u}


def com_load(conn: pymysql.connections.Connection) -> int:
    """LOAD DATA statements the downstream has run since it started."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_load'")
        return int(cur.fetchone()[1])


def record(path: Path, position: Position | None) -> None:
    if position is None:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(position.to_json())
    os.replace(tmp, path)


def child(argv: list[str]) -> int:
    """The writer process: resume after the checkpoint, write, record, maybe pause recording."""
    parser = argparse.ArgumentParser()
    parser.add_argument("database")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--kill-after", type=int, default=-1)
    args = parser.parse_args(argv)
    uri = parse_sink_uri(os.environ[URI_ENV])
    conn = pymysql.connect(**uri.connection.connection_kwargs())
    schemas = {
        name: load_table_schema(conn, name)
        for name in (TableName(args.database, "t"), TableName(args.database, "u"))
    }
    conn.close()
    changes = stream(args.database)
    if args.checkpoint.exists():
        checkpoint = Position.from_json(args.checkpoint.read_text())
        changes = [c for c in changes if c.position > checkpoint]
    sink = MySQLSink(uri, schemas.__getitem__, "crash-test")
    recording = True
    for batch, start in enumerate(range(0, len(changes), BATCH)):
        sink.write_rows(changes[start : start + BATCH])
        if batch == args.kill_after:
            sink.flush()
            recording = False
            print("WRITTEN", flush=True)
        elif recording and batch % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
            record(args.checkpoint, sink.flush())
    record(args.checkpoint, sink.flush())
    sink.close()
    print("DONE", flush=True)
    return 0


@pytest.mark.parametrize("load_rows", [0, 10], ids=["statements", "load-data"])
def test_a_sink_killed_before_its_checkpoint_converges_on_replay(
    sink_db: Any, sink_database: str, tmp_path: Path, load_rows: int
) -> None:
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(T_DDL.format(name=f"`{sink_database}`.t"))
            cur.execute(U_DDL.format(name=f"`{sink_database}`.u"))
        changes = stream(sink_database)
        checkpoint_file = tmp_path / "checkpoint.json"
        query = f"?worker-count=4&max-txn-row=50&load-data-rows={load_rows}"
        env = {**os.environ, URI_ENV: sink_db.uri + query}
        loads = com_load(conn)
        argv = [sys.executable, __file__, sink_database, str(checkpoint_file)]

        writer = subprocess.Popen(
            [*argv, "--kill-after", str(KILL_AFTER)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "WRITTEN"
            time.sleep(0.3)  # let it write on, uncheckpointed, mid-transaction
            os.kill(writer.pid, signal.SIGKILL)
        finally:
            writer.kill()
            writer.wait(30)
        assert writer.returncode == -signal.SIGKILL

        checkpoint = Position.from_json(checkpoint_file.read_text())
        done = [c for c in changes if c.position <= checkpoint]
        assert 0 < len(done) < len(changes)
        after_kill = downstream(conn, sink_database)
        # the downstream is ahead of the checkpoint and short of the end: a real crash window
        assert after_kill != state(done)
        assert after_kill != state(changes)
        assert len(done) < BATCH * KILL_AFTER  # batches flushed after it were not recorded

        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip() == "DONE"
        assert Position.from_json(checkpoint_file.read_text()) == changes[-1].position
        final = downstream(conn, sink_database)
        assert (com_load(conn) > loads) is (load_rows > 0)
    finally:
        conn.close()
    expected = state(changes)
    assert len(expected["t"]) > 500 and len(expected["u"]) > 50
    assert final["t"] == expected["t"]
    assert final["u"] == expected["u"]


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
