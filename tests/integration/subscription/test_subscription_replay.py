"""The replaying pull consumer (``cdc.subscription.replay``) against a real MariaDB target.

Changes applied twice end as applied once (rows by key, a DDL once by its
position); values land exactly; a target that cannot take a change is named
with the table and the fix, and nothing of the batch is acked. Through a
served pull sink, the consumer subscribes again after the server lost its
batch (a new ring after a restart) and applies what comes again harmlessly.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from subscription_helpers import Served, pos
from testkit import execute

from cdc.model import DdlEvent, DdlKind, Op, RowChange, TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.subscription import SubscriptionClient
from cdc.subscription.replay import PROGRESS_TABLE, ApplyError, Replayer, ReplayStats, TargetApplier
from cdc.uri.mysql import parse_source_uri


@pytest.fixture
def applier(sink_db: MariaDBServer, sink_database: str) -> Iterator[TargetApplier]:
    execute(
        sink_db,
        f"CREATE TABLE `{sink_database}`.t (id INT PRIMARY KEY, v VARCHAR(20), "
        "d DECIMAL(10,2), ts TIMESTAMP(3) NULL, s SET('a','b','c'), b VARBINARY(8), "
        "doubled INT AS (id * 2) PERSISTENT)",
    )
    opened = TargetApplier(parse_source_uri(sink_db.uri), f"feed/{sink_database}")
    try:
        yield opened
    finally:
        opened.close()
        execute(
            sink_db,
            f"DELETE FROM {PROGRESS_TABLE.quoted()} WHERE consumer = 'feed/{sink_database}'",
        )


def image(key: int, v: str) -> dict[str, object]:
    return {
        "id": key,
        "v": v,
        "d": Decimal("12.50"),
        "ts": dt.datetime(2038, 1, 19, 3, 14, 7, 500_000, tzinfo=dt.UTC),
        "s": frozenset({"a", "c"}),
        "b": b"\x00\xff",
        "doubled": key * 2,
    }


def changes(table: TableName) -> list[RowChange | DdlEvent]:
    return [
        RowChange(table, Op.CREATE, None, image(1, "one"), (1,), pos(10)),
        RowChange(table, Op.CREATE, None, image(2, "two"), (2,), pos(10)),
        RowChange(table, Op.UPDATE, image(1, "one"), image(1, "uno"), (1,), pos(20)),
        RowChange(table, Op.UPDATE, image(2, "two"), image(5, "moved"), (5,), pos(30)),
        DdlEvent(pos(40), table.schema, (table,), DdlKind.ADD_COLUMN, "ALTER TABLE t ADD x INT"),
        RowChange(table, Op.CREATE, None, {**image(7, "seven"), "x": 3}, (7,), pos(50)),
        RowChange(table, Op.DELETE, image(1, "uno"), None, (1,), pos(60)),
    ]


def rows(sink_db: MariaDBServer, db: str) -> list[tuple[object, ...]]:
    columns = "id, v, d, UNIX_TIMESTAMP(ts), s, HEX(b), doubled, x"
    return execute(sink_db, f"SELECT {columns} FROM `{db}`.t ORDER BY id")


def test_changes_applied_twice_end_as_applied_once(
    applier: TargetApplier, sink_db: MariaDBServer, sink_database: str
) -> None:
    table = TableName(sink_database, "t")
    stats = ReplayStats()
    applier.apply(changes(table), stats)
    at = Decimal("2147483647.500")
    expected = [
        (5, "moved", Decimal("12.50"), at, "a,c", "00FF", 10, None),
        (7, "seven", Decimal("12.50"), at, "a,c", "00FF", 14, 3),
    ]
    assert rows(sink_db, sink_database) == expected
    assert (stats.rows, stats.ddls, stats.ddls_passed, stats.applied) == (6, 1, 0, pos(60))

    again = TargetApplier(parse_source_uri(sink_db.uri), applier.consumer)
    try:
        assert again.last_ddl == pos(40), "the DDL progress is kept in the target"
        replayed = ReplayStats()
        again.apply(changes(table), replayed)
    finally:
        again.close()
    assert (replayed.ddls, replayed.ddls_passed) == (0, 1)
    assert rows(sink_db, sink_database) == expected


def test_a_ddl_already_in_the_target_is_passed(
    applier: TargetApplier, sink_db: MariaDBServer, sink_database: str
) -> None:
    execute(sink_db, f"ALTER TABLE `{sink_database}`.t ADD x INT")
    table = TableName(sink_database, "t")
    stats = ReplayStats()
    applier.apply([changes(table)[4]], stats)
    assert stats.ddls == 1 and applier.last_ddl == pos(40)


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (
            RowChange(TableName("nowhere", "t"), Op.CREATE, None, {"id": 1}, (1,), pos(1)),
            "the target has no table nowhere.t: create it from the source's definition",
        ),
        (
            "extra",
            "has no column extra that the change at binlog.000001:1 carries",
        ),
        (
            "keyless",
            "has no primary key or NOT NULL unique key in the target",
        ),
        (
            "ddl",
            "the target refused the DDL at binlog.000001:1 (add column)",
        ),
        (
            "value",
            "the target refused a row",
        ),
        (
            "rounded",
            "the target would change a row: the downstream would not store the values as sent",
        ),
    ],
)
def test_a_change_the_target_cannot_take_is_named(
    applier: TargetApplier,
    sink_db: MariaDBServer,
    sink_database: str,
    event: object,
    words: str,
) -> None:
    table = TableName(sink_database, "t")
    case = event
    if event == "extra":
        event = RowChange(table, Op.CREATE, None, {**image(1, "x"), "extra": 1}, (1,), pos(1))
    elif event == "keyless":
        execute(sink_db, f"CREATE TABLE `{sink_database}`.k (v INT)")
        event = RowChange(TableName(sink_database, "k"), Op.CREATE, None, {"v": 1}, (1,), pos(1))
    elif event == "ddl":
        statement = "ALTER TABLE nope ADD y INT"
        event = DdlEvent(pos(1), sink_database, (table,), DdlKind.ADD_COLUMN, statement)
    elif event == "value":
        event = RowChange(table, Op.CREATE, None, {**image(1, "x" * 30)}, (1,), pos(1))
    elif event == "rounded":
        rounded = {**image(1, "x"), "d": Decimal("1.234")}
        event = RowChange(table, Op.CREATE, None, rounded, (1,), pos(1))
    ok = RowChange(table, Op.CREATE, None, image(9, "fine"), (9,), pos(0))
    with pytest.raises(ApplyError) as caught:
        applier.apply([ok, event], ReplayStats())  # type: ignore[list-item]
    assert words in str(caught.value)
    if case != "ddl":  # the rows before a DDL are committed before it runs
        count = execute(sink_db, f"SELECT COUNT(*) FROM `{sink_database}`.t")
        assert count == [(0,)], "the rows of a refused batch are rolled back"


def test_the_consumer_subscribes_again_when_its_batch_is_gone(
    served: Served, applier: TargetApplier, sink_db: MariaDBServer, sink_database: str
) -> None:
    table = TableName(sink_database, "t")
    sink = served.open_sink()
    client = SubscriptionClient(served.target, "feed-1", "replay", [f"{sink_database}.*"])
    served.clients.append(client)
    replayer = Replayer(client, applier)
    assert replayer.step() == 0 and replayer.subscribed
    sink.write_rows([c for c in changes(table)[:4] if isinstance(c, RowChange)])
    assert replayer.step(2) == 2
    sink.close()  # the server went away: its rings with it, the subscription kept in etcd
    assert replayer.step() == 0 and not replayer.subscribed
    restarted = served.open_sink()
    restarted.write_rows([c for c in changes(table)[:4] if isinstance(c, RowChange)])
    got = 0
    while got < 4:
        got += replayer.step()
    assert replayer.stats.subscribes == 2
    found = execute(sink_db, f"SELECT id, v FROM `{sink_database}`.t ORDER BY id")
    assert found == [(1, "uno"), (5, "moved")]


REPLAY_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pull_replay.py"


def run_replay_example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPLAY_EXAMPLE), *args], capture_output=True, text=True, timeout=60
    )


def test_the_replay_example_refuses_bad_arguments_and_changefeeds_it_cannot_pull(
    served: Served, sink_db: MariaDBServer
) -> None:
    common = ("--server", served.target, "--client", "dw", "--rule", "shop.*")
    bad_uri = run_replay_example(*common, "--changefeed", "feed-1", "--target-uri", "pg://x/")
    assert bad_uri.returncode == 2
    assert "error: --target-uri: unsupported scheme 'pg://'" in bad_uri.stderr
    bad_batch = run_replay_example(
        *common, "--changefeed", "feed-1", "--target-uri", sink_db.uri, "--batch", "0"
    )
    assert bad_batch.returncode == 2 and "--batch must be >= 1" in bad_batch.stderr
    missing = run_replay_example(*common, "--changefeed", "nope", "--target-uri", sink_db.uri)
    assert missing.returncode == 1
    assert "error: Subscribe failed: NOT_FOUND: changefeed 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr + bad_uri.stderr + bad_batch.stderr
