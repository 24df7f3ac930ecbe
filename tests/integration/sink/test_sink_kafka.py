"""The Kafka sink against a real broker (Tansu) and the consumer against a real MariaDB.

Rows of one key stay in one partition in binlog order, an UPDATE that moves
its key becomes a DELETE and an INSERT in their partitions, a 5 MiB row is
split and joined again, and nothing is reported durable while the broker is
stopped (SIGSTOP): ``flushed`` stands still and ``flush`` waits for it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from testkit import execute

from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.playground.kafka import KafkaBroker
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port
from cdc.schema.loader import load_table_schema
from cdc.sink.base import SinkError
from cdc.sink.kafka.consumer import ConsumerConfig, KafkaChangeConsumer
from cdc.sink.kafka.kind import KAFKA
from cdc.sink.kafka.producer import KafkaProducer
from cdc.sink.kafka.sink import KafkaSink
from cdc.sink.kafka.uri import KafkaSinkURI
from cdc.sink.kind import SinkCheckFailed
from cdc.sink.registry import parse_sink_uri
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

TABLE = "CREATE TABLE `{db}`.t (id int PRIMARY KEY, v varchar(20), big longtext)"


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def sink_uri(broker: KafkaBroker, topic: str, more: str = "") -> KafkaSinkURI:
    uri = parse_sink_uri(f"kafka://{broker.bootstrap}/{topic}?partition-num=3{more}")
    assert isinstance(uri, KafkaSinkURI)
    return uri


@pytest.fixture
def schema(source_db: MariaDBServer, source_database: str) -> TableSchema:
    execute(source_db, TABLE.format(db=source_database))
    conn = source_db.connect()
    try:
        return load_table_schema(conn, TableName(source_database, "t"))
    finally:
        conn.close()


@pytest.fixture
def stopped_broker_resumes(kafka_broker: KafkaBroker) -> Iterator[None]:
    """Whatever the test does to the broker, it runs again afterwards."""
    yield
    pid = kafka_broker.pid
    if pid is not None:
        os.kill(pid, signal.SIGCONT)


def messages(broker: KafkaBroker, topic: str) -> list[Any]:
    """Every message of ``topic``, partition by partition, in offset order."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "read-all"})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        found = []
        for partition in sorted(metadata.topics[topic].partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list[Any] = []
            while len(got) < high:
                got += [m for m in consumer.consume(500, 1.0) if m.error() is None]
            found += got
        return found
    finally:
        consumer.close()


class Rows:
    """Row changes of one table at rising positions."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.offset = 1000
        self.current: dict[int, dict[str, Any]] = {}

    def _next(self) -> Position:
        self.offset += 10
        return Position("binlog.000001", self.offset)

    def insert(self, key: int, v: str, big: str | None = None) -> RowChange:
        row = {"id": key, "v": v, "big": big}
        self.current[key] = row
        return RowChange(self.schema.name, Op.CREATE, None, row, (key,), self._next())

    def update(self, key: int, new_key: int, v: str) -> RowChange:
        before = self.current.pop(key)
        after = {**before, "id": new_key, "v": v}
        self.current[new_key] = after
        return RowChange(self.schema.name, Op.UPDATE, before, after, (new_key,), self._next())

    def delete(self, key: int) -> RowChange:
        before = self.current.pop(key)
        return RowChange(self.schema.name, Op.DELETE, before, None, (key,), self._next())


def test_rows_of_a_key_stay_in_one_partition_in_order_and_moved_keys_are_split(
    kafka_broker: KafkaBroker, schema: TableSchema, topic: str
) -> None:
    rows = Rows(schema)
    changes = [rows.insert(k, "v0") for k in range(60)]
    for rnd in range(1, 6):
        changes += [rows.update(k, k, f"v{rnd}") for k in range(0, 60, 2)]
    changes.append(rows.update(1, 1001, "moved"))
    changes.append(rows.delete(3))
    sink = KafkaSink(sink_uri(kafka_broker, topic), {schema.name: schema}.__getitem__, "cf")
    try:
        sink.write_rows(changes)
        assert sink.flush() == changes[-1].position
    finally:
        sink.close()
    found = messages(kafka_broker, topic)
    assert len(found) == len(changes) + 1  # the key move is two messages
    partition_of: dict[str, int] = {}
    last: dict[str, tuple[int, int]] = {}
    for message in found:
        body = json.loads(message.value())
        key = body["data"][0]["id"]
        assert partition_of.setdefault(key, message.partition()) == message.partition()
        position = (body["_position"]["offset"], message.offset())
        assert position > last.get(key, (0, -1)), f"key {key} out of order"
        last[key] = position
        assert message.key() == json.dumps({"id": key}, separators=(",", ":")).encode()
    assert len(set(partition_of.values())) == 3
    bodies = [json.loads(m.value()) for m in found]
    moved = [b for b in bodies if b["_position"]["offset"] == changes[-2].position.offset]
    assert sorted((b["type"], b["data"][0]["id"]) for b in moved) == [
        ("DELETE", "1"),
        ("INSERT", "1001"),
    ]


def test_the_consumer_applies_rows_a_ddl_and_a_5_mib_row_at_the_watermarks(
    kafka_broker: KafkaBroker,
    schema: TableSchema,
    topic: str,
    sink_db: MariaDBServer,
    sink_database: str,
) -> None:
    target_table = TableName(sink_database, "t")
    execute(sink_db, TABLE.format(db=sink_database))
    target = TableSchema(target_table, schema.columns, schema.primary_key, version=1)
    rows = Rows(target)
    big = "é" * (5 * 1024 * 1024 // 2) + "end"
    uri = sink_uri(kafka_broker, topic)
    sink = KafkaSink(uri, {target_table: target}.__getitem__, "cf")
    try:
        sink.write_rows([rows.insert(k, f"v{k}") for k in range(20)])
        sink.write_rows(
            [rows.insert(100, "big", big), rows.update(2, 200, "moved"), rows.delete(5)]
        )
        ddl_at = Position("binlog.000001", rows.offset + 5)
        sink.apply_ddl(
            DdlEvent(
                ddl_at,
                sink_database,
                (target_table,),
                DdlKind.ADD_COLUMN,
                "ALTER TABLE t ADD c int",
            )
        )
        rows.offset += 10
        sink.send_watermark(Position("binlog.000001", rows.offset), [topic])
        sink.flush()
    finally:
        sink.close()
    fragments = [m for m in messages(kafka_broker, topic) if len(m.headers() or []) == 2]
    assert len(fragments) >= 5, "a 5 MiB row in fragments of at most 1 MiB"
    consumer = KafkaChangeConsumer(
        ConsumerConfig(
            kafka_broker.bootstrap, (topic,), parse_source_uri(sink_db.uri), group=f"g-{topic}"
        )
    )
    try:
        stats = consumer.run(until=lambda s: s.applied is not None, timeout=120)
    finally:
        consumer.close()
    assert stats.ddls == 1 and stats.watermarks == 3 and stats.seen_ddl
    got = execute(sink_db, f"SELECT id, v, big, c FROM `{sink_database}`.t ORDER BY id")
    expected = sorted((k, r["v"], r["big"], None) for k, r in rows.current.items())
    assert [(r[0], r[1], r[3]) for r in got] == [(e[0], e[1], e[3]) for e in expected]
    assert [r[2] for r in got if r[0] == 100] == [big]


def test_nothing_is_durable_while_the_broker_is_stopped(
    kafka_broker: KafkaBroker, schema: TableSchema, topic: str, stopped_broker_resumes: None
) -> None:
    rows = Rows(schema)
    sink = KafkaSink(sink_uri(kafka_broker, topic), {schema.name: schema}.__getitem__, "cf")
    try:
        sink.write_rows([rows.insert(k, "before") for k in range(10)])
        durable = sink.flush()
        pid = kafka_broker.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            sink.write_rows([rows.insert(k, "during") for k in range(10, 50)])
            done = threading.Event()
            flusher = threading.Thread(target=lambda: (sink.flush(), done.set()), daemon=True)
            flusher.start()
            assert not done.wait(5), "flush returned while the broker was stopped"
            assert sink.flushed == durable
        finally:
            os.kill(pid, signal.SIGCONT)
        flusher.join(120)
        assert done.is_set()
        assert sink.flushed == Position("binlog.000001", rows.offset)
    finally:
        sink.close()
    assert len(messages(kafka_broker, topic)) == 50


def no_rows(table: TableName) -> TableSchema:
    raise LookupError(table)


def test_create_time_checks_say_what_is_wrong(kafka_broker: KafkaBroker, topic: str) -> None:
    nobody = parse_sink_uri(f"kafka://127.0.0.1:{free_port()}/{topic}")
    with pytest.raises(SinkCheckFailed, match="cannot reach the Kafka brokers") as info:
        KAFKA.check_reachable(nobody)
    assert info.value.field == "sink-uri"
    KAFKA.check_reachable(sink_uri(kafka_broker, topic))
    KafkaSink(sink_uri(kafka_broker, topic), no_rows, "cf").close()  # creates the topic
    six = parse_sink_uri(f"kafka://{kafka_broker.bootstrap}/{topic}?partition-num=6")
    with pytest.raises(SinkCheckFailed, match="has 3 partitions but partition-num is 6"):
        KAFKA.check_reachable(six)
    with pytest.raises(SinkError, match="set partition-num=3"):
        KAFKA.open(six, no_rows, "cf")


def test_a_refused_message_fails_with_what_to_change(kafka_broker: KafkaBroker, topic: str) -> None:
    uri = sink_uri(kafka_broker, topic, "&max-message-bytes=4KiB")
    producer = KafkaProducer(uri, "refused")
    try:
        assert producer.partitions(topic) == 3
        with pytest.raises(SinkError, match="MSG_SIZE_TOO_LARGE.*lower max-message-bytes"):
            producer.send(topic, 0, None, b"x" * 8192, [])
        producer.send(topic, 7, None, b"x", [])
        with pytest.raises(SinkError, match=f"topic {topic} partition 7: _UNKNOWN_PARTITION"):
            producer.flush()
        assert producer.failed
    finally:
        producer.close()
