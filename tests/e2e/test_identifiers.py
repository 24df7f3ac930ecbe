"""Awkward identifiers end to end through `cdc-server`: snapshot, binlog, DDL, both sinks,
then `cdcctl diff`.

Databases, tables and columns whose names hold dots, spaces, backticks, quotes,
reserved words and non-Latin letters (database `shop-eu.v2`, table `it's a.table`,
columns `order`, `naïve.col`, `a``b`, Chinese names) are captured by a real
`cdc-server` process (tests/cluster_harness.py) through changefeeds created with
`cdcctl changefeed create`. Rows exist before the changefeeds are created
(snapshot); inserts, updates and deletes follow (binlog); an ADD COLUMN with such
a name is followed by rows using it, and a CREATE TABLE with a dotted name adds a
table while the changefeeds run (DDL).

* Into the downstream MariaDB (one changefeed over both databases): `cdcctl
  diff` must find the downstream equal to the source.
* Into the file sink, two changefeeds (the second over two tables in two
  databases, and a third that a CREATE TABLE adds while it runs): the
  folders, replayed into an empty downstream, must be equal to the source.
  The owner records each DDL in the folder the capture's sink holds under its
  lock, and the added table's rows, read by a catch-up reader behind the
  others, keep their own checkpoint.

Table names travel as ``str(TableName)`` in etcd keys, task names and chunk
ids; a split at the first dot once made every table of such a changefeed fail
with ``no such table on the source: shop-eu.v2.it's``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster
from testkit import execute, position_now, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore, TableRecord
from cdc.cli.main import main as cdcctl
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file.reader import replay_into
from cdc.store.keys import TableCheckpointKey

CAPTURE = "ids-1"
TABLE = "it's a.table"
TIMEOUT = 240
#: Errors of a changefeed (each retried by the owner) that end a wait at once.
RETRIES = 3
DB_FEED = "ids-db"
FILE_FEEDS = ("ids-files-1", "ids-files-2")


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
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    """One `cdc-server` process (owner and processor) on a cluster id of its own."""
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=DB_FEED, name="ids")
    try:
        cluster.start(CAPTURE)
        yield cluster
    finally:
        cluster.close()


def file_feeds(shop: str, other: str) -> dict[str, list[str]]:
    """The file sink's changefeeds and their rules: the second takes two tables, one of
    them added by a CREATE TABLE while it runs."""
    return {
        FILE_FEEDS[0]: [f"{q(shop)}.{q(TABLE)}"],
        FILE_FEEDS[1]: [f"{q(shop)}.`select`", f"{q(other)}.*", f"{q(shop)}.{q('new.t`able')}"],
    }


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


def changes(shop: str, other: str) -> list[str]:
    """Binlog row changes with the same awkward names, after the changefeeds start."""
    t, sel, chinese = names(shop, other)
    return [
        f"INSERT INTO {t} VALUES (100, 1, 'new', 'x`y', '新')",
        f"UPDATE {t} SET `order` = `order` + 1, `naïve.col` = 'upd' WHERE id <= 10",
        f"UPDATE {t} SET id = id + 1000 WHERE id = 11",
        f"DELETE FROM {t} WHERE id IN (12, 13)",
        f"UPDATE {sel} SET `from` = 'moved', `it's` = -1 WHERE `pk.id` > 25",
        f"DELETE FROM {sel} WHERE `pk.id` = 1",
        f"INSERT INTO {chinese} VALUES (99, 'new', 0)",
        f"DELETE FROM {chinese} WHERE `编号` < 3",
    ]


def schema_changes(shop: str, other: str) -> list[str]:
    """DDL with awkward names (new columns, a new table), and rows using what they made."""
    t, _, chinese = names(shop, other)
    new = f"{q(shop)}.{q('new.t`able')}"
    return [
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


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """`cdcctl ARGS` in this process; its JSON answer, which must say success."""
    code = cdcctl(list(args))
    out, err = capsys.readouterr()
    assert code == 0, (args, code, out, err)
    return json.loads(out)


def create(
    capsys: pytest.CaptureFixture[str],
    cluster: Cluster,
    cf: str,
    source_uri: str,
    sink_uri: str,
    rules: list[str],
) -> None:
    """`cdcctl changefeed create` through the server's admin API, small chunks."""
    filters = [arg for r in rules for arg in ("--filter-rule", r)]
    cli(
        capsys,
        *("changefeed", "create", "--server", cluster.api_address(), "--changefeed-id", cf),
        *("--source-uri", source_uri, "--sink-uri", sink_uri, *filters),
        *("--chunk-size", "7", "--spark-master", "local[1]"),
    )


def wait_caught_up(cluster: Cluster, feeds: list[str], target: Position) -> None:
    """Until every changefeed's checkpoint passes ``target`` in state normal. A changefeed
    in state error is retried by the owner, as in production (a first Spark start can
    fail); failed, or an error the retries did not cure, ends the wait at once."""
    store = ChangefeedStore(cluster.store)

    def reached() -> bool:
        statuses = {cf: store.get(cf).status for cf in feeds}
        stuck = {
            cf: (s.state.value, len(s.error_history), s.error and s.error.message)
            for cf, s in statuses.items()
            if s.state is ChangefeedState.FAILED or len(s.error_history) >= RETRIES
        }
        assert not stuck, f"changefeeds failed or failing again after retries: {stuck}"
        return all(
            s.state is ChangefeedState.NORMAL
            and s.checkpoint is not None
            and s.checkpoint.key() >= target.key()
            for s in statuses.values()
        )

    try:
        wait_for(reached, TIMEOUT, f"{feeds} to pass {target}", every=0.3)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ntables in error: {table_errors(cluster)}") from None


def table_errors(cluster: Cluster) -> dict[str, str]:
    """Every table of the cluster's changefeeds whose record holds an error."""
    keys = cluster.store.keys
    out = {}
    for item in cluster.store.get_prefix(keys.prefix_of(TableCheckpointKey)):
        record = TableRecord.from_dict(item.json())
        if record.error:
            out[item.key] = record.error
    return out


def diff(
    capsys: pytest.CaptureFixture[str], source: MariaDBServer, target: MariaDBServer, dbs: tuple
) -> dict[str, Any]:
    filters = [arg for db in dbs for arg in ("--filter", rule(db))]
    args = ["diff", "--source-uri", source.uri, "--target-uri", target.uri, *filters]
    report = cli(capsys, *args, "--chunk-size", "5")
    assert report["equal"] is True, report
    return report


def test_awkward_names_into_the_downstream_mariadb(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    databases: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shop, other = databases
    execute(source_db, *before(shop, other))
    source_uri = source_db.uri_by_reference(tmp_path, "source")
    sink_uri = sink_db.uri_by_reference(tmp_path, "sink")
    rules = [rule(db) for db in databases]
    create(capsys, cluster, DB_FEED, source_uri, sink_uri, rules)
    wait_caught_up(cluster, [DB_FEED], position_now(source_db))
    execute(source_db, *changes(shop, other), *schema_changes(shop, other))
    wait_caught_up(cluster, [DB_FEED], position_now(source_db))

    # The table keys are the quoted string form, and every table ran, the new one too.
    keys = cluster.store.keys
    tables = {
        keys.parse(i.key).table  # type: ignore[attr-defined]
        for i in cluster.store.get_prefix(keys.prefix_of(TableCheckpointKey, DB_FEED))
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


@pytest.mark.parametrize(
    "with_ddl",
    [
        pytest.param(False, id="rows"),
        pytest.param(True, id="rows-and-ddl"),
    ],
)
def test_awkward_names_into_the_file_sink_replay_to_the_source(
    with_ddl: bool,
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    databases: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shop, other = databases
    execute(source_db, *before(shop, other))
    source_uri = source_db.uri_by_reference(tmp_path, "source")
    roots = {cf: tmp_path / cf for cf in FILE_FEEDS}
    for cf, rules in file_feeds(shop, other).items():
        create(capsys, cluster, cf, source_uri, f"file://{roots[cf]}?flush-interval=200ms", rules)
    wait_caught_up(cluster, list(FILE_FEEDS), position_now(source_db))
    execute(source_db, *changes(shop, other), *(schema_changes(shop, other) if with_ddl else ()))
    wait_caught_up(cluster, list(FILE_FEEDS), position_now(source_db))

    # The folders, replayed into a downstream without these databases, are the source again.
    target = sink_db.connect()
    try:
        replayed = [replay_into(roots[cf], target) for cf in FILE_FEEDS]
    finally:
        target.close()
    assert sum(stats.rows for stats in replayed) >= 90
    report = diff(capsys, source_db, sink_db, databases)
    assert len(report["tables"]) == (4 if with_ddl else 3)
