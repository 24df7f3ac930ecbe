"""Awkward identifiers end to end: snapshot, binlog, DDL, both sinks, then `cdcctl diff`.

Databases, tables and columns whose names hold dots, spaces, backticks, quotes,
reserved words and non-Latin letters (database `shop-eu.v2`, table `it's a.table`,
columns `order`, `naïve.col`, `a``b`, Chinese names) are captured by two
changefeeds: one into the downstream MariaDB, run by an in-process cluster
(owner and processor, table tasks in etcd, Spark snapshot), one into the file
sink, run by the single-process ChangefeedRunner (in a cluster every table
pipeline would open the file sink's folder and only the first gets its lock).
Rows exist before the changefeeds are created (snapshot); inserts, updates and deletes follow
(binlog); an ADD COLUMN with such a name is followed by rows using it, and a
CREATE TABLE with a dotted name adds a table while the changefeeds run (DDL).
`cdcctl diff` must then find the downstream equal to the source, and the file
sink's folder, replayed into the emptied downstream, equal again.

Table names travel as ``str(TableName)`` in etcd keys, task names and chunk
ids; a split at the first dot once made every table of such a changefeed fail
with ``no such table on the source: shop-eu.v2.it's``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from testkit import execute, position_now, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore, TableRecord
from cdc.cli.main import main as cdcctl
from cdc.config import load_changefeed_config
from cdc.config.changefeed import ChangefeedConfig
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file.reader import replay_into
from cdc.store import Election, EtcdStore, KeepAlive
from cdc.store.keys import TableCheckpointKey
from owner.owner import Owner, OwnerOptions
from owner.retry import RetryPolicy
from processor.pipeline import PipelineOptions
from processor.processor import Processor
from processor.runner import ChangefeedRunner

CAPTURE = "ids-1"
TABLE = "it's a.table"
TIMEOUT = 240


def q(name: str) -> str:
    """``name`` quoted for SQL."""
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def rule(db: str) -> str:
    """A filter rule taking every table of ``db`` (the quoted-literal filter syntax)."""
    return f"{q(db)}.*"


@pytest.fixture
def databases(source_db: MariaDBServer, sink_db: MariaDBServer) -> Iterator[tuple[str, str]]:
    """Two source databases with awkward names, dropped on both servers afterwards."""
    tag = uuid.uuid4().hex[:6]
    names = (f"shop-eu.v2 {tag}", f'a`b "q" 商店 select.{tag}')
    execute(source_db, *(f"CREATE DATABASE {q(n)}" for n in names))
    yield names
    for server in (source_db, sink_db):
        execute(server, *(f"DROP DATABASE IF EXISTS {q(n)}" for n in names))


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with etcd_server.store(etcd_prefix) as store:
        yield store


@pytest.fixture
def cluster(store: EtcdStore, spark: Any) -> Iterator[None]:
    """One capture under a lease running a processor and, once elected, the owner."""
    lease = store.grant_lease(5)
    keepalive = KeepAlive(lease).start()
    store.put(store.keys.capture(CAPTURE), {"id": CAPTURE}, lease=lease)
    processor = Processor(
        store,
        CAPTURE,
        lambda _config: spark,
        options=PipelineOptions(checkpoint_interval=0.3, batch_chunks=4),
        interval=0.2,
    )
    processor.start()
    election = Election(store, CAPTURE, ttl=5)
    owner = Owner(
        store,
        CAPTURE,
        election.campaign(timeout=10),
        OwnerOptions(cycle_interval=0.2, retry=RetryPolicy(initial=0.5), barrier_interval=0.1),
    )
    owner.start()
    try:
        yield
    finally:
        processor.suspend()
        processor.stop()
        owner.stop()
        keepalive.stop()
        lease.revoke()
        election.resign()


def names(shop: str, other: str) -> tuple[str, str, str]:
    """The three tables there from the start, quoted for SQL."""
    return f"{q(shop)}.{q(TABLE)}", f"{q(shop)}.`select`", f"{q(other)}.`表 x`"


def before(shop: str, other: str) -> list[str]:
    """Tables and rows that exist before the changefeeds: the snapshot reads them."""
    t, sel, chinese = names(shop, other)
    statements = [
        f"CREATE TABLE {t} (id INT PRIMARY KEY, `order` INT, `naïve.col` VARCHAR(40),"
        " `a``b` VARCHAR(20), `名字` VARCHAR(20) CHARACTER SET utf8mb4)",
        f"CREATE TABLE {sel} (`pk.id` INT PRIMARY KEY, `from` VARCHAR(20), `it's` INT)",
        f'CREATE TABLE {chinese} (`编号` INT PRIMARY KEY, `"quoted"` VARCHAR(20), `key` INT)'
        " DEFAULT CHARSET=utf8mb4",
    ]
    for i in range(1, 31):
        statements += [
            f"INSERT INTO {t} VALUES ({i}, {i * 10}, 'n.{i}', 'b`{i}', '名{i}')",
            f"INSERT INTO {sel} VALUES ({i}, 'f{i}', {i})",
            f"INSERT INTO {chinese} VALUES ({i}, 'q\"{i}', {i})",
        ]
    return statements


def after(shop: str, other: str) -> list[str]:
    """Binlog changes and DDL with the same awkward names, after the changefeeds start."""
    t, sel, chinese = names(shop, other)
    new = f"{q(shop)}.{q('new.t`able')}"
    return [
        f"INSERT INTO {t} VALUES (100, 1, 'new', 'x`y', '新')",
        f"UPDATE {t} SET `order` = `order` + 1, `naïve.col` = 'upd' WHERE id <= 10",
        f"UPDATE {t} SET id = id + 1000 WHERE id = 11",
        f"DELETE FROM {t} WHERE id IN (12, 13)",
        f"UPDATE {sel} SET `from` = 'moved', `it's` = -1 WHERE `pk.id` > 25",
        f"DELETE FROM {sel} WHERE `pk.id` = 1",
        f"INSERT INTO {chinese} VALUES (99, 'new', 0)",
        f"DELETE FROM {chinese} WHERE `编号` < 3",
        f"ALTER TABLE {t} ADD COLUMN `new col.v2` VARCHAR(20) DEFAULT 'd'",
        f"INSERT INTO {t} (id, `order`, `new col.v2`) VALUES (200, 2, 'uses it')",
        f"UPDATE {t} SET `new col.v2` = CONCAT('v', id) WHERE id < 5",
        f"ALTER TABLE {chinese} ADD COLUMN `备注 ``x``` VARCHAR(20)",
        f"UPDATE {chinese} SET `备注 ``x``` = 'ok' WHERE `编号` > 20",
        f"CREATE TABLE {new} (`id.x` INT PRIMARY KEY, `desc` VARCHAR(20))",
        f"INSERT INTO {new} VALUES (1, 'one'), (2, 'two')",
        f"UPDATE {new} SET `desc` = 'TWO' WHERE `id.x` = 2",
        f"INSERT INTO {t} (id, `order`) VALUES (300, 3)",
    ]


def changefeed(
    cf: str, source: MariaDBServer, sink_uri: str, databases: tuple[str, ...]
) -> ChangefeedConfig:
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": cf,
            "source_uri": source.uri,
            "sink_uri": sink_uri,
            "rules": [rule(db) for db in databases],
            "chunk_size": 7,
        },
    )
    # The test servers have generated passwords: store them with the config.
    return replace(config, store_credentials=True)


def table_errors(store: EtcdStore, cf: str) -> dict[str, str]:
    keys = store.keys
    out = {}
    for item in store.get_prefix(keys.prefix_of(TableCheckpointKey, cf)):
        record = TableRecord.from_dict(item.json())
        if record.error:
            out[keys.parse(item.key).table] = record.error  # type: ignore[attr-defined]
    return out


def wait_caught_up(store: EtcdStore, cf: str, target: Position) -> None:
    """Until ``cf``'s checkpoint passes ``target``; fails at once on a changefeed or table error."""

    def reached() -> bool:
        status = ChangefeedStore(store).get(cf).status
        errors = table_errors(store, cf)
        assert not errors, f"{cf}: tables in error: {errors}"
        assert status.state is ChangefeedState.NORMAL and status.error is None, (
            f"{cf} is {status.state.value}: {status.error}"
        )
        return status.checkpoint is not None and status.checkpoint.key() >= target.key()

    wait_for(reached, TIMEOUT, f"changefeed {cf} to pass {target}", every=0.3)


def diff(
    capsys: pytest.CaptureFixture[str], source: MariaDBServer, target: MariaDBServer, dbs: tuple
) -> dict[str, Any]:
    filters = [arg for db in dbs for arg in ("--filter", rule(db))]
    args = ["diff", "--source-uri", source.uri, "--target-uri", target.uri, *filters]
    code = cdcctl([*args, "--chunk-size", "5"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert code == 0 and report["equal"] is True, (code, out, err)
    return report


class InProcess:
    """A ChangefeedRunner on a thread: the file sink's changefeed."""

    def __init__(self, runner: ChangefeedRunner) -> None:
        self.runner = runner
        self.stop = threading.Event()
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.runner.run(self.stop)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure.append(exc)

    def wait_caught_up(self, target: Position) -> None:
        def reached() -> bool:
            assert not self.failure, self.failure
            assert self.thread.is_alive(), "the file sink's changefeed ended early"
            checkpoint = self.runner.stats.checkpoint
            return checkpoint is not None and checkpoint.key() >= target.key()

        wait_for(reached, TIMEOUT, f"the file sink's changefeed to pass {target}", every=0.3)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.failure, self.failure


def test_awkward_names_through_snapshot_binlog_ddl_both_sinks_and_diff(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    databases: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spark: Any,
    cluster: None,
) -> None:
    shop, other = databases
    execute(source_db, *before(shop, other))
    root = tmp_path / "files"
    ChangefeedStore(store).create(changefeed("ids-db", source_db, sink_db.uri, databases))
    files_config = changefeed(
        "ids-files", source_db, f"file://{root}?flush-interval=200ms", databases
    )
    files = InProcess(ChangefeedRunner(files_config, store, spark))
    try:
        snapshot_done = position_now(source_db)
        wait_caught_up(store, "ids-db", snapshot_done)
        files.wait_caught_up(snapshot_done)
        execute(source_db, *after(shop, other))
        end = position_now(source_db)
        wait_caught_up(store, "ids-db", end)
        files.wait_caught_up(end)
    finally:
        files.close()

    # The table keys are the quoted string form, and every table ran, the new one too.
    tables = {
        store.keys.parse(i.key).table  # type: ignore[attr-defined]
        for i in store.get_prefix(store.keys.prefix_of(TableCheckpointKey, "ids-db"))
    }
    assert tables == {
        f"{q(shop)}.`it's a.table`",
        f"{q(shop)}.select",
        f"{q(shop)}.`new.t``able`",
        f"{q(other)}.表 x",
    }

    report = diff(capsys, source_db, sink_db, databases)
    assert report["summary"]["rows_checked"] >= 80
    assert len(report["tables"]) == 4
    columns = execute(
        sink_db,
        f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {literal(shop)}"
        f" AND TABLE_NAME = {literal(TABLE)} ORDER BY ORDINAL_POSITION",
    )
    assert [c for (c,) in columns] == ["id", "order", "naïve.col", "a`b", "名字", "new col.v2"]

    # The file sink's folder, replayed into the emptied downstream, is the source again.
    execute(sink_db, *(f"DROP DATABASE {q(db)}" for db in databases))
    target = sink_db.connect()
    try:
        stats = replay_into(root, target)
    finally:
        target.close()
    assert stats.rows >= 90
    diff(capsys, source_db, sink_db, databases)
