"""The consumer's loop: read every partition of the topics, merge by watermark, apply, commit.

    assign every partition of the topics, at the group's committed offsets (else the start)
    loop: consume a batch ──► join fragments ──► decode ──► Merger.add
          Merger.step ──► TargetWriter.apply (one transaction per watermark step)
          ──► Merger.done ──► commit offsets (the first message not applied, per partition)

One process reads all partitions: the lowest watermark over all of them is
what makes a step safe, so partitions are assigned, not balanced over a
group (the group id names the committed offsets and the progress row).
Offsets are a shortcut for a restart; the progress row in the target is what
makes a restart exact (``apply.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from cdc.logs import get_logger
from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.sink.kafka.consumer.apply import TargetWriter
from cdc.sink.kafka.consumer.events import MessageError, Watermark, decode_message
from cdc.sink.kafka.consumer.merge import Merger, Partition
from cdc.sink.kafka.fragments import Joiner
from cdc.uri.mysql import MySQLURI

__all__ = ["ConsumerConfig", "ConsumerStats", "KafkaChangeConsumer"]

_METADATA_TIMEOUT = 10.0


@dataclass(frozen=True)
class ConsumerConfig:
    """Where to read and where to write. ``group`` names the committed offsets and the
    progress row in the target."""

    bootstrap: str
    topics: tuple[str, ...]
    target: MySQLURI
    group: str = "cdc-kafka-consumer"
    batch: int = 2000


@dataclass
class ConsumerStats:
    """What the consumer did so far."""

    messages: int = 0
    rows: int = 0
    ddls: int = 0
    watermarks: int = 0
    steps: int = 0
    skipped: int = 0
    applied: Position | None = None
    seen_ddl: list[str] = field(default_factory=list)


class KafkaChangeConsumer:
    """Reads canal-json topics written by the Kafka sink into a MySQL database, in order."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.log = get_logger(__name__, consumer=config.group)
        self.writer = TargetWriter(config.target, config.group)
        self.consumer = Consumer(
            {
                "bootstrap.servers": config.bootstrap,
                "group.id": config.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 64 * 1024 * 1024,
            }
        )
        partitions = self._partitions()
        self.merger = Merger(partitions, self.writer.applied())
        self.joiners = {p: Joiner() for p in partitions}
        self.stats = ConsumerStats(applied=self.merger.applied)
        self._assign(partitions)

    def _partitions(self) -> list[Partition]:
        metadata = self.consumer.list_topics(timeout=_METADATA_TIMEOUT)
        found: list[Partition] = []
        for topic in self.config.topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise KafkaException(f"topic {topic!r} does not exist on {self.config.bootstrap}")
            found += [(topic, number) for number in sorted(info.partitions)]
        return found

    def _assign(self, partitions: Sequence[Partition]) -> None:
        wanted = [TopicPartition(topic, number) for topic, number in partitions]
        committed = self.consumer.committed(wanted, timeout=_METADATA_TIMEOUT)
        for item in committed:
            if item.offset < 0:
                item.offset = OFFSET_BEGINNING
        self.consumer.assign(committed)

    def close(self) -> None:
        self.consumer.close()
        self.writer.close()

    def run(
        self,
        *,
        until: Callable[[ConsumerStats], bool] = lambda stats: False,
        timeout: float | None = None,
    ) -> ConsumerStats:
        """Consumes until ``until(stats)`` holds after a step, or ``timeout`` seconds pass."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not until(self.stats):
            if deadline is not None and time.monotonic() > deadline:
                break
            self.poll_once()
        return self.stats

    def poll_once(self, wait: float = 0.2) -> None:
        """One batch of messages, then one step if the watermarks allow it."""
        for message in self.consumer.consume(self.config.batch, wait):
            self._take(message)
        step = self.merger.step()
        if step is None:
            return
        self.writer.apply(step)
        self.merger.done(step)
        self.stats.steps += 1
        self.stats.rows = self.writer.rows
        self.stats.ddls = self.writer.ddls
        self.stats.applied = step.watermark
        self.stats.skipped = self.merger.skipped
        self._commit()

    def _take(self, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return
            raise KafkaException(error)
        topic, number, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and number is not None and offset is not None
        partition = (topic, number)
        where = f"{topic}[{number}]@{offset}"
        raw = message.headers() or []
        pairs = raw.items() if isinstance(raw, dict) else raw
        headers = [(k, v) for k, v in pairs if isinstance(v, bytes)]
        value = self.joiners[partition].add(headers, message.value() or b"", offset, where)
        self.stats.messages += 1
        if value is None:
            self.merger.seen(partition, offset)
            return
        try:
            event = decode_message(value, where)
        except MessageError:
            self.log.error("cannot read %s; stopping before it", where)
            raise
        if isinstance(event, Watermark):
            self.stats.watermarks += 1
        elif isinstance(event, DdlEvent):
            self.stats.seen_ddl.append(event.statement)
        self.merger.add(partition, offset, event)

    def _commit(self) -> None:
        pending = {p: j.first_offset for p, j in self.joiners.items()}
        offsets = self.merger.commit_offsets(pending)
        if offsets:
            self.consumer.commit(
                offsets=[TopicPartition(t, n, o) for (t, n), o in offsets.items()],
                asynchronous=False,
            )
