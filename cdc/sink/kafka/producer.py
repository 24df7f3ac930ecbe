"""The Kafka producer of a sink: librdkafka, idempotent, acks=all, every delivery counted.

    send(topic, partition, key, value, headers)   queued in librdkafka; never waits for
                                                  the broker, only for room in the queue
    flush()                                       returns once every message sent so far is
                                                  acknowledged by all in-sync replicas;
                                                  SinkError if any was refused
    partitions(topic)                             the topic's partition count, the topic
                                                  created first if missing

Why these settings: ``enable.idempotence`` makes librdkafka's retries neither
duplicate nor reorder a partition's messages (up to 5 requests in flight),
``acks=all`` makes an acknowledgement mean the message survives a broker
loss. A broker that cannot be reached is waited for: librdkafka retries until
``message.timeout.ms`` (5 minutes); while it does, ``flush`` blocks, so
nothing past an unacknowledged message is reported durable. A message it
gives up on, or one the broker refuses (too large, not authorized, unknown
topic), fails the next ``flush`` with a ``SinkError`` naming the topic, the
partition and what to change; the changefeed then restarts from its
checkpoints. A fatal producer error (the idempotence state lost) does the same.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cdc.logs import get_logger
from cdc.sink.base import SinkError
from cdc.sink.kafka.uri import KafkaSinkURI

__all__ = ["Headers", "KafkaProducer", "producer_config"]

Headers = list[tuple[str, str | bytes | None]]
"""A message's headers, as librdkafka takes them."""

#: How long librdkafka retries a message before it gives up on it.
MESSAGE_TIMEOUT_MS = 300_000
_METADATA_TIMEOUT = 10.0
_TOPIC_READY_TIMEOUT = 30.0
_WAIT_LOG_EVERY = 10.0

_HINTS = {
    KafkaError.MSG_SIZE_TOO_LARGE: (
        "the broker refuses messages this large: lower max-message-bytes in the sink URI, or "
        "raise the broker's message.max.bytes and the topic's max.message.bytes"
    ),
    KafkaError._MSG_TIMED_OUT: (
        "the broker did not acknowledge it within 300 s (unreachable or overloaded?); the "
        "changefeed restarts from its checkpoint"
    ),
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "grant the sink's client Write on the topic",
    KafkaError.UNKNOWN_TOPIC_OR_PART: "the topic or partition is gone: was it deleted?",
    KafkaError._UNKNOWN_PARTITION: (
        "the topic has no such partition: was it deleted and created again with fewer?"
    ),
    KafkaError.NOT_ENOUGH_REPLICAS: (
        "fewer in-sync replicas than the topic's min.insync.replicas: check the brokers"
    ),
}


def producer_config(uri: KafkaSinkURI, client_id: str) -> dict[str, object]:
    """librdkafka settings of the sink's producer (see the module docstring)."""
    return {
        "bootstrap.servers": uri.bootstrap,
        "client.id": client_id,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "message.max.bytes": uri.max_message_bytes,
        "batch.size": min(uri.max_message_bytes, 1_000_000),
        "linger.ms": 5,
        "queue.buffering.max.kbytes": 262_144,
        # Successes are counted by the queue's length; only failures call back (a Python
        # call per acknowledged message cost a fifth of the sink's time).
        "delivery.report.only.error": True,
        "logger": logging.getLogger("cdc.sink.kafka.librdkafka"),
    }


def describe_error(error: KafkaError, where: str) -> str:
    """``error`` in words: what failed, where, and what to do."""
    hint = _HINTS.get(error.code(), "see the broker's log")
    return f"Kafka refused a message for {where}: {error.name()}: {error.str()}; {hint}"


class KafkaProducer:
    """One librdkafka producer and the count of its unacknowledged messages.

    Not thread-safe: one sink drives it (delivery reports run in ``send`` and
    ``flush``, on the caller's thread).
    """

    def __init__(self, uri: KafkaSinkURI, client_id: str) -> None:
        self.uri = uri
        self.log = get_logger(__name__, client=client_id)
        self.sent = 0
        self._failure: str | None = None
        self._partitions: dict[str, int] = {}
        config = producer_config(uri, client_id)
        config["error_cb"] = self._on_error
        config["on_delivery"] = self._failed
        try:
            self._producer = Producer(config)
        except KafkaException as exc:
            raise SinkError(f"cannot create the Kafka producer: {exc}", uri.masked) from exc

    # --- sending ------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes,
        headers: Headers,
    ) -> None:
        """Queues one message; waits only while librdkafka's queue is full."""
        self._check()
        while True:
            try:
                self._producer.produce(topic, value, key, partition=partition, headers=headers)
                break
            except BufferError:
                self._producer.poll(0.1)
                self._check()
            except KafkaException as exc:
                raise SinkError(describe_error(exc.args[0], f"{topic}[{partition}]")) from exc
        self.sent += 1
        if self.sent % 1000 == 0:
            self._producer.poll(0)

    def flush(self) -> None:
        """Blocks until every message sent is acknowledged; SinkError if one was refused."""
        started = last_log = time.monotonic()
        while self.outstanding:
            self._producer.flush(1.0)
            self._check()
            now = time.monotonic()
            if self.outstanding and now - last_log >= _WAIT_LOG_EVERY:
                last_log = now
                self.log.warning(
                    "waiting %.0f s for the broker to acknowledge %d message(s) (%s); nothing "
                    "past them is reported durable",
                    now - started,
                    self.outstanding,
                    self.uri.bootstrap,
                )
        self._check()

    @property
    def failed(self) -> bool:
        """Whether a message was refused or given up on (``flush`` then raises)."""
        return self._failure is not None

    @property
    def outstanding(self) -> int:
        """Messages sent and not acknowledged yet (or whose failure is not reported yet)."""
        return len(self._producer)

    def poll(self) -> None:
        """Serves delivery reports already in (no wait)."""
        self._producer.poll(0)

    def _failed(self, error: KafkaError | None, message: Message) -> None:
        if error is not None and self._failure is None:
            self._failure = describe_error(
                error, f"topic {message.topic()} partition {message.partition()}"
            )

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._failure = self._failure or f"the Kafka producer failed: {error.str()}"
            return
        self.log.warning("Kafka: %s", error.str())

    def _check(self) -> None:
        if self._failure is not None:
            raise SinkError(self._failure, self.uri.masked)

    # --- topics -------------------------------------------------------------------------------

    def partitions(self, topic: str) -> int:
        """The partition count of ``topic``, creating it if missing; SinkError when the
        count is not the URI's ``partition-num`` (keys would land elsewhere)."""
        known = self._partitions.get(topic)
        if known is None:
            known = self._partitions[topic] = ensure_topic(self.uri, topic)
        return known

    def close(self) -> None:
        """Drops what is not delivered yet (it is sent again from the checkpoint)."""
        self._producer.purge()
        self._producer.flush(0)


def _topic_partitions(admin: AdminClient, topic: str) -> int | None:
    try:
        metadata = admin.list_topics(timeout=_METADATA_TIMEOUT)
    except KafkaException as exc:
        raise SinkError(
            f"cannot reach the Kafka brokers to read topic metadata: {exc.args[0].str()}; check "
            "that they run and that the sink URI's hosts and ports are right"
        ) from exc
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


def ensure_topic(uri: KafkaSinkURI, topic: str) -> int:
    """Creates ``topic`` with ``partition-num`` partitions if missing; its partition count,
    which must be ``partition-num``."""
    admin = AdminClient({"bootstrap.servers": uri.bootstrap})
    count = _topic_partitions(admin, topic)
    if count is None:
        replication = uri.replication_factor or -1
        new = NewTopic(topic, num_partitions=uri.partition_num, replication_factor=replication)
        future = admin.create_topics([new], operation_timeout=_METADATA_TIMEOUT)[topic]
        try:
            future.result()
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise SinkError(
                    f"cannot create topic {topic!r} ({uri.partition_num} partitions, replication "
                    f"{uri.replication_factor or 'broker default'}): {error.str()}; create it "
                    "yourself or fix the sink URI's partition-num / replication-factor"
                ) from exc
        deadline = time.monotonic() + _TOPIC_READY_TIMEOUT
        while (count := _topic_partitions(admin, topic)) is None:
            if time.monotonic() > deadline:
                raise SinkError(f"topic {topic!r} was created but its metadata never appeared")
            time.sleep(0.1)
    if count != uri.partition_num:
        raise SinkError(
            f"topic {topic!r} has {count} partitions but the sink URI says partition-num="
            f"{uri.partition_num}; rows are spread by key over partition-num partitions, so they "
            f"must agree: set partition-num={count} (a new changefeed) or use another topic"
        )
    return count
