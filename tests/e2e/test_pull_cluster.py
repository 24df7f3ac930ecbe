"""A pull changefeed on three `cdc-server` processes, replayed into MariaDB by a pull client.

The client (``cdc.subscription.replay``, what ``examples/pull_replay.py``
runs) knows every capture's address and applies each batch before acking it.
A write load runs over two tables, with updates that move keys; every key's
changes reach the client in binlog order. Mid-stream
the client stops for 20 s: no checkpoint may pass what the source held when
it stopped (nothing after it was acked), and the ring holds the rest. A DDL,
a table created by DDL (which joins the capture's stream behind it) and a
5 MiB row follow; then the capture serving the changefeed is SIGKILLed under
load: the owner moves the tables, the client is sent to the new capture and
continues after its last ack (at least once: some acked changes come again).
In the end ``cdcctl diff`` finds the client's database equal to the source,
the client has seen the DDL, and ``cdcctl subscription list`` shows it on the
new capture with its acked position.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cluster_harness import CAPTURES, Cluster
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState, TaskState
from cdc.cli.main import main as cdcctl
from cdc.model.events import RowChange
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.subscription import SubscriptionClient, SubscriptionRpcError
from cdc.subscription.replay import Replayer, TargetApplier
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

CF = "pull-3"
CLIENT = "dw"
TIMEOUT = 240
PAUSE = 20.0


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="pull")
    try:
        cluster.start(*CAPTURES)
        yield cluster
    finally:
        cluster.close()


def caught_up(cluster: Cluster, target: Position) -> None:
    def reached() -> bool:
        status = cluster.status()
        assert status.state is not ChangefeedState.FAILED, cluster.describe()
        return status.checkpoint is not None and status.checkpoint.key() >= target.key()

    cluster.wait(reached, TIMEOUT, f"the checkpoint to pass {target}")


class Load:
    """Inserts, updates, key moves and deletes over ``tables`` until stopped."""

    def __init__(self, source_db: MariaDBServer, db: str, tables: tuple[str, ...]) -> None:
        self.source_db, self.db = source_db, db
        self.tables = tables
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        conn = self.source_db.connect()
        try:
            with conn.cursor() as cur:
                i = 0
                while not self.stop.is_set():
                    i += 1
                    tables = self.tables
                    t = f"`{self.db}`.{tables[i % len(tables)]}"
                    cur.execute(f"INSERT INTO {t} (id, v) VALUES ({100_000 + i}, {i})")
                    cur.execute(f"UPDATE {t} SET v = v + 1 WHERE id % 13 = {i % 13} AND id < 500")
                    cur.execute(f"UPDATE {t} SET id = {1_000_000 + i} WHERE id = {100_000 + i - 6}")
                    cur.execute(f"DELETE FROM {t} WHERE id = {1_000_000 + i - 20}")
                    conn.commit()
                    self.transactions += 1
                    time.sleep(0.01)
        except BaseException as exc:  # the test reports it
            self.error = exc
        finally:
            conn.close()


class Client:
    """The replaying pull client on a thread of the test; ``pause`` holds it between steps."""

    def __init__(self, replayer: Replayer) -> None:
        self.replayer = replayer
        self.stop = threading.Event()
        self.go = threading.Event()
        self.go.set()
        self.idle = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                if not self.go.is_set():
                    self.idle.set()
                    self.go.wait(0.2)
                    continue
                self.idle.clear()
                subscribed = self.replayer.subscribed
                if self.replayer.step(500, 0.5) == 0 and not subscribed:
                    time.sleep(0.3)
        except BaseException as exc:  # the test reports it
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def pause(self) -> None:
        self.go.clear()
        self.idle.wait(30)
        assert self.idle.is_set(), "the client did not stop"

    def close(self) -> None:
        self.stop.set()
        self.go.set()
        self._thread.join(60)


class RecordingApplier(TargetApplier):
    """The consumer's applier, keeping (table, key, position) of every row it applied."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seen: list[tuple[str, tuple[Any, ...], tuple[int, int]]] = []

    def apply(self, events: Any, stats: Any) -> None:
        super().apply(events, stats)
        for event in events:
            if isinstance(event, RowChange):
                position = event.position
                order = (int(position.file.rsplit(".", 1)[1]), position.offset)
                self.seen.append((str(event.table), event.key, order))


def check_key_order(seen: list[tuple[str, tuple[Any, ...], tuple[int, int]]]) -> int:
    """The positions of a key's changes, first sightings only (redelivery after a capture's
    death or a reconnect replays from a checkpoint), never go back; how many there were."""
    sightings: dict[tuple[str, tuple[Any, ...]], set[tuple[int, int]]] = {}
    last: dict[tuple[str, tuple[Any, ...]], tuple[int, int]] = {}
    rows = 0
    for table, key, order in seen:
        if order in sightings.setdefault((table, key), set()):
            continue
        sightings[(table, key)].add(order)
        assert order >= last.get((table, key), (0, 0)), f"{table} {key} went back to {order}"
        last[(table, key)] = order
        rows += 1
    return rows


def copy_tables(source_db: MariaDBServer, sink_db: MariaDBServer, db: str, *tables: str) -> None:
    """The target starts with the source's table definitions (the client applies rows)."""
    statements = [f"CREATE DATABASE IF NOT EXISTS `{db}`", f"USE `{db}`"]
    for table in tables:
        statements.append(execute(source_db, f"SHOW CREATE TABLE `{db}`.{table}")[0][1])
    execute(sink_db, *statements)


def checkpoints(cluster: Cluster) -> list[Position]:
    """The changefeed checkpoint and every table's, as persisted now."""
    found = [r.checkpoint for r in cluster.records().values() if r.checkpoint is not None]
    status = cluster.status().checkpoint
    return found + ([status] if status is not None else [])


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def subscribed(client: SubscriptionClient) -> bool:
    """Whether ``client`` could subscribe now (False while no capture serves the changefeed)."""
    try:
        client.subscribe()
    except SubscriptionRpcError as exc:
        if exc.code is not grpc.StatusCode.UNAVAILABLE:
            raise
        return False
    return True


def serving(cluster: Cluster) -> str:
    holders = {t.capture_id for t in cluster.tasks().values() if t.state is TaskState.RUN}
    assert len(holders) == 1, f"a pull changefeed runs on one capture: {cluster.describe()}"
    return holders.pop()


def test_a_pull_changefeed_survives_a_stopped_client_and_a_dead_serving_capture(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    for table in ("a", "b"):
        definition = "(id INT PRIMARY KEY, v INT, note LONGTEXT)"
        execute(source_db, f"CREATE TABLE `{db}`.{table} {definition}")
    copy_tables(source_db, sink_db, db, "a", "b")
    cluster.create_changefeed(source_db, sink_db, db, sink_uri="pull://", snapshot_mode="never")
    cluster.wait(lambda: len(cluster.tasks()) == 2, TIMEOUT, "the tables to be scheduled")
    addresses = [s.address for s in cluster.servers.values()]
    client = SubscriptionClient(addresses, CF, CLIENT, [f"{db}.*"])
    applier = RecordingApplier(parse_source_uri(sink_db.uri), f"{CF}/{CLIENT}")
    replayer = Replayer(client, applier)
    runner = Client(replayer)
    try:
        with Load(source_db, db, ("a", "b")) as load:
            cluster.wait(lambda: load.transactions > 100, TIMEOUT, "the load to run")
            caught_up(cluster, position_now(source_db))

            # the client stops: nothing after what it acked may become a checkpoint
            runner.pause()
            stopped_at = position_now(source_db)
            until = time.monotonic() + PAUSE
            samples = 0
            while time.monotonic() < until:
                for checkpoint in checkpoints(cluster):
                    assert checkpoint.key() <= stopped_at.key(), (
                        f"checkpoint {checkpoint} passed {stopped_at}, what the source held "
                        "when the client stopped acking"
                    )
                samples += 1
                time.sleep(0.2)
            assert samples >= 5, "the checkpoints were sampled during the pause"
            assert position_now(source_db).key() > stopped_at.key(), "the load stopped"
            code, listed, err = cli_json(
                capsys, "subscription", "list", "-c", CF, "--server", cluster.api_address()
            )
            assert code == 0, err
            (held,) = listed
            assert held["client"] == CLIENT and held["live"] is True, listed
            assert 0 < held["unacked"] <= held["capacity"], held
            runner.go.set()
            caught_up(cluster, position_now(source_db))

            execute(source_db, f"ALTER TABLE `{db}`.a ADD COLUMN extra VARCHAR(10) DEFAULT 'x'")
            execute(source_db, f"CREATE TABLE `{db}`.c (id INT PRIMARY KEY, v INT, note TEXT)")
            load.tables = ("a", "b", "c")
            big = "é" * (5 * 1024 * 1024 // 2)
            execute(source_db, f"INSERT INTO `{db}`.b (id, v, note) VALUES (7777777, 1, '{big}')")
            cluster.wait(lambda: load.transactions > 300, TIMEOUT, "load on the new table")
            caught_up(cluster, position_now(source_db))
            runner.check()

            holder = serving(cluster)
            cluster.kill(holder)
            cluster.wait_gone(holder)
            cluster.wait(
                lambda: (
                    len(cluster.tasks()) == 3
                    and all(
                        t.capture_id != holder and t.state is TaskState.RUN
                        for t in cluster.tasks().values()
                    )
                ),
                TIMEOUT,
                f"the tables of {holder} to run elsewhere",
            )
            moved = load.transactions
            cluster.wait(lambda: load.transactions > moved + 200, TIMEOUT, "load after the kill")
        end = position_now(source_db)
        caught_up(cluster, end)
        runner.check()
    finally:
        runner.close()
        client.close()
        applier.close()
    try:
        runner.check()
        stats = replayer.stats
        assert any("ADD COLUMN extra" in ddl for ddl in stats.seen_ddl), stats.seen_ddl
        assert any("CREATE TABLE" in ddl for ddl in stats.seen_ddl), stats.seen_ddl
        assert stats.subscribes >= 2, "the client subscribed again after the kill"
        new = serving(cluster)
        assert new != holder
        assert client.target == cluster.servers[new].address, "the client follows the tables"
        report = cdc_diff(capsys, source_db, sink_db, db)
        assert report["equal"] is True, report
        assert check_key_order(applier.seen) > 1000

        code, listed, err = cli_json(
            capsys, "subscription", "list", "--server", cluster.api_address()
        )
        assert code == 0, err
        (row,) = [r for r in listed if r["changefeed"] == CF]
        assert row["client"] == CLIENT and row["rules"] == [f"{db}.*"]
        assert row["serving_capture"] == new and row["live"] is True
        assert row["acked"] is not None and row["unacked"] == 0
        code, _, err = cli_json(
            capsys, "subscription", "query", "-c", CF, "--client", "nobody",
            "--server", cluster.api_address(),
        )  # fmt: skip
        assert code == 2 and "has no subscription" in err
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")


def cdc_diff(
    capsys: pytest.CaptureFixture[str], source_db: MariaDBServer, sink_db: MariaDBServer, db: str
) -> dict[str, Any]:
    code = cdcctl(
        [
            *("diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
            *("--filter", f"{db}.*", "--chunk-size", "200"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, (code, out, err)
    report: dict[str, Any] = json.loads(out)
    return report


def test_a_serving_capture_stops_gracefully_while_its_client_acks_nothing(
    etcd_server: EtcdServer,
    tmp_path: Path,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGTERM waits for the client's acks only a while: its pull sink is then closed, the
    process exits 0, the other capture takes the table and the client gets everything."""
    db = source_database
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed="pull-stop", name="pull")
    try:
        cluster.start(*CAPTURES[:2])
        execute(source_db, f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT, note LONGTEXT)")
        copy_tables(source_db, sink_db, db, "a")
        cluster.create_changefeed(source_db, sink_db, db, sink_uri="pull://", snapshot_mode="never")
        cluster.wait(lambda: len(cluster.tasks()) == 1, TIMEOUT, "the table to be scheduled")
        addresses = [s.address for s in cluster.servers.values()]
        stalled = SubscriptionClient(addresses, "pull-stop", CLIENT, [f"{db}.*"])
        try:
            cluster.wait(lambda: subscribed(stalled), TIMEOUT, "a capture to serve the changefeed")
            values = ", ".join(f"({i}, {i})" for i in range(1, 201))
            execute(source_db, f"INSERT INTO `{db}`.a (id, v) VALUES {values}")
            assert len(stalled.get(10, timeout=30)) > 0, "changes reach the client"
        finally:
            stalled.close()
        holder = serving(cluster)
        server = cluster.servers[holder]
        server.signal(signal.SIGTERM)
        assert server.proc.returncode == 0, f"see {server.log}"
        assert "did not ack within" in server.log.read_text()

        client = SubscriptionClient(addresses, "pull-stop", CLIENT)
        applier = TargetApplier(parse_source_uri(sink_db.uri), f"pull-stop/{CLIENT}")
        runner = Client(Replayer(client, applier))
        try:
            execute(source_db, f"UPDATE `{db}`.a SET v = v * 2 WHERE id % 3 = 0")
            caught_up(cluster, position_now(source_db))
            runner.check()
        finally:
            runner.close()
            client.close()
            applier.close()
        assert serving(cluster) != holder
        report = cdc_diff(capsys, source_db, sink_db, db)
        assert report["equal"] is True, report
    finally:
        cluster.close()
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")
