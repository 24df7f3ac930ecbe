"""A Kafka-sink changefeed on three `cdc-server` processes, read back by the consumer.

Two tables are snapshotted (chunks written to Kafka by Spark tasks), then a
write load runs with updates that move keys. Mid-stream the broker is stopped
(SIGSTOP) for 20 s: no checkpoint may pass what was in the source when it
stopped (nothing written after could have been acknowledged), and after
SIGCONT everything goes on. A DDL and a 5 MiB row follow, then a capture that
holds a table is SIGKILLed under load and its tables move. The consumer
(``cdc.sink.kafka.consumer``) applies the topic to a MariaDB database while
all this happens, one watermark step at a time; in the end ``cdcctl diff``
finds it equal to the source, every key's messages are in one partition in
binlog order, and the consumer has seen the DDL and the watermarks.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import CAPTURES, Cluster
from confluent_kafka import Consumer, TopicPartition
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState, TaskState
from cdc.cli.main import main as cdcctl
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.kafka import KafkaBroker
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.kafka.consumer import ConsumerConfig, KafkaChangeConsumer
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

CF = "kafka-3"
TIMEOUT = 240
FREEZE = 20.0
TABLES = ("a", "b")


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="kafka")
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
    """Inserts, updates, key moves and deletes over both tables until stopped."""

    def __init__(self, source_db: MariaDBServer, db: str) -> None:
        self.source_db, self.db = source_db, db
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
                    t = f"`{self.db}`.{TABLES[i % 2]}"
                    cur.execute(f"INSERT INTO {t} (id, v) VALUES ({100_000 + i}, {i})")
                    cur.execute(f"UPDATE {t} SET v = v + 1 WHERE id % 13 = {i % 13} AND id < 500")
                    moved = 1_000_000 + i
                    cur.execute(f"UPDATE {t} SET id = {moved} WHERE id = {100_000 + i - 6}")
                    cur.execute(f"DELETE FROM {t} WHERE id = {1_000_000 + i - 20}")
                    conn.commit()
                    self.transactions += 1
                    time.sleep(0.01)
        except BaseException as exc:  # the test reports it
            self.error = exc
        finally:
            conn.close()


class Applier:
    """The consumer, polling in a thread of the test until stopped."""

    def __init__(self, consumer: KafkaChangeConsumer) -> None:
        self.consumer = consumer
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self.consumer.poll_once()
        except BaseException as exc:  # the test reports it
            self.error = exc

    def applied(self) -> Position | None:
        if self.error is not None:
            raise self.error
        return self.consumer.stats.applied

    def close(self) -> None:
        self.stop.set()
        self._thread.join(60)
        self.consumer.close()


def copy_tables(source_db: MariaDBServer, sink_db: MariaDBServer, db: str) -> None:
    """The target starts with the source's table definitions (the consumer applies rows)."""
    statements = [f"CREATE DATABASE IF NOT EXISTS `{db}`", f"USE `{db}`"]
    for table in TABLES:
        statements.append(execute(source_db, f"SHOW CREATE TABLE `{db}`.{table}")[0][1])
    execute(sink_db, *statements)


def checkpoints(cluster: Cluster) -> list[Position]:
    """The changefeed checkpoint and every table's, as persisted now."""
    found = [r.checkpoint for r in cluster.records().values() if r.checkpoint is not None]
    status = cluster.status().checkpoint
    return found + ([status] if status is not None else [])


def all_messages(broker: KafkaBroker, topic: str) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "audit"})
    try:
        found: list[Any] = []
        for partition in range(3):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list[Any] = []
            while len(got) < high:
                got += [m for m in consumer.consume(1000, 1.0) if m.error() is None]
            found += got
        return found
    finally:
        consumer.close()


def check_key_order(messages: list[Any]) -> int:
    """Every key's rows are in one partition; the positions of a key's messages, first
    sightings only (a capture's death replays from a checkpoint), never go back."""
    partition_of: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], set[tuple[str, int]]] = {}
    last: dict[tuple[str, str], tuple[int, int]] = {}
    rows = 0
    for message in messages:
        headers = dict(message.headers() or [])
        if headers.get("cdc-kind") != b"row" or "cdc-fragment" in headers:
            continue
        body = json.loads(message.value())
        key = (body["table"], body["data"][0]["id"])
        assert partition_of.setdefault(key, message.partition()) == message.partition(), key
        position = body["_position"]
        sighting = (position["file"], position["offset"])
        if sighting in seen.setdefault(key, set()):
            continue
        seen[key].add(sighting)
        order = (int(position["file"].rsplit(".", 1)[1]), position["offset"])
        assert order >= last.get(key, (0, 0)), f"{key} went back to {sighting}"
        last[key] = order
        rows += 1
    return rows


def test_a_kafka_changefeed_survives_a_frozen_broker_and_a_dead_capture(
    cluster: Cluster,
    kafka_broker: KafkaBroker,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    topic = f"cdc-{uuid.uuid4().hex[:8]}"
    statements = []
    for table in TABLES:
        statements.append(f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY, v INT, note LONGTEXT)")
        values = ", ".join(f"({i}, {i}, 'n{i}')" for i in range(1, 401))
        statements.append(f"INSERT INTO `{db}`.{table} (id, v, note) VALUES {values}")
    execute(source_db, *statements)
    copy_tables(source_db, sink_db, db)
    cluster.create_changefeed(
        source_db,
        sink_db,
        db,
        sink_uri=f"kafka://{kafka_broker.bootstrap}/{topic}?partition-num=3",
        chunk_size=100,
    )
    caught_up(cluster, position_now(source_db))
    consumer = KafkaChangeConsumer(
        ConsumerConfig(kafka_broker.bootstrap, (topic,), parse_source_uri(sink_db.uri), group=topic)
    )
    applier = Applier(consumer)
    pid = kafka_broker.pid
    assert pid is not None
    try:
        with Load(source_db, db) as load:
            cluster.wait(lambda: load.transactions > 100, TIMEOUT, "the load to run")
            os.kill(pid, signal.SIGSTOP)
            try:
                stopped_at = position_now(source_db)
                frozen_until = time.monotonic() + FREEZE
                samples = 0
                while time.monotonic() < frozen_until:
                    for checkpoint in checkpoints(cluster):
                        assert checkpoint.key() <= stopped_at.key(), (
                            f"checkpoint {checkpoint} passed {stopped_at}, what the source held "
                            "when the broker stopped"
                        )
                    samples += 1
                    time.sleep(0.2)
                assert samples > 20
                assert position_now(source_db).key() > stopped_at.key(), "the load stopped"
            finally:
                os.kill(pid, signal.SIGCONT)
            caught_up(cluster, position_now(source_db))

            execute(source_db, f"ALTER TABLE `{db}`.a ADD COLUMN extra VARCHAR(10) DEFAULT 'x'")
            big = "é" * (5 * 1024 * 1024 // 2)
            execute(source_db, f"INSERT INTO `{db}`.b (id, v, note) VALUES (7777777, 1, '{big}')")
            caught_up(cluster, position_now(source_db))

            holder = next(
                t.capture_id
                for name, t in cluster.tasks().items()
                if name.endswith(".a") and t.state is TaskState.RUN
            )
            cluster.kill(holder)
            cluster.wait_gone(holder)
            cluster.wait(
                lambda: all(
                    t.capture_id != holder and t.state is TaskState.RUN
                    for t in cluster.tasks().values()
                ),
                TIMEOUT,
                f"the tables of {holder} to run elsewhere",
            )
            cluster.wait(lambda: load.transactions > 400, TIMEOUT, "more load after the kill")
        end = position_now(source_db)
        caught_up(cluster, end)

        def consumed() -> bool:
            applied = applier.applied()
            return applied is not None and applied.key() >= end.key()

        cluster.wait(consumed, TIMEOUT, f"the consumer to apply everything up to {end}")
    finally:
        applier.close()
    try:
        stats = consumer.stats
        assert any("ADD COLUMN extra" in ddl for ddl in stats.seen_ddl), stats.seen_ddl
        assert stats.watermarks > 3 and stats.steps > 1
        report = cdc_diff(capsys, source_db, sink_db, db)
        assert report["equal"] is True, report
        assert check_key_order(all_messages(kafka_broker, topic)) > 1000
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
    if code != 0:  # the whole report: an assertion's message would be cut short
        pytest.fail(f"cdcctl diff exited {code}:\n{out}\n{err}", pytrace=False)
    report: dict[str, Any] = json.loads(out)
    return report
