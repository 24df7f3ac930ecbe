"""The owner's watermarks: each new changefeed checkpoint, to every partition of every topic.

TiCDC's owner emits the changefeed's checkpoint to every partition (its
``EmitCheckpointTs``); so does ours. The changefeed checkpoint is the lowest
table checkpoint, and a table's checkpoint is persisted only after the sink
flushed (every message up to it acknowledged), so when a watermark at ``W``
is written, every row at or before ``W`` of every table is already in its
partition, before the watermark. A consumer merging partitions applies what
lies at or below the lowest watermark of all partitions (``consumer/``).

The owner's cycle must not wait for Kafka: ``write`` keeps only the newest
checkpoint and a thread sends it. A watermark that cannot be sent (a broker
away) is logged and superseded by the next one; a lost watermark delays a
consumer, it never misleads one.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from cdc.logs import get_logger
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.kafka.sink import KafkaSink
from cdc.sink.kafka.uri import KafkaSinkURI

__all__ = ["KafkaWatermarks"]


def _no_rows(table: TableName) -> TableSchema:
    raise LookupError(f"the watermark writer writes no rows (asked for {table})")


class KafkaWatermarks:
    """Sends the newest checkpoint :meth:`write` was given, from its own thread."""

    def __init__(self, uri: KafkaSinkURI, changefeed_id: str) -> None:
        self.uri = uri
        self.changefeed_id = changefeed_id
        self.log = get_logger(__name__, changefeed=changefeed_id, sink="kafka")
        self._cond = threading.Condition()
        self._pending: tuple[Position, frozenset[TableName]] | None = None
        self._sent: Position | None = None
        self._closed = False
        self._sink: KafkaSink | None = None
        self._last_error = ""
        self._thread = threading.Thread(target=self._run, name="kafka-watermarks", daemon=True)
        self._thread.start()

    @property
    def sent(self) -> Position | None:
        """The last watermark handed to the producer."""
        return self._sent

    def write(self, checkpoint: Position, tables: Collection[TableName]) -> None:
        """Announces ``checkpoint`` for ``tables`` (their topics and the default one)."""
        with self._cond:
            self._pending = (checkpoint, frozenset(tables))
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(15)
        if self._sink is not None:
            self._sink.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                pending, self._pending = self._pending, None
            assert pending is not None
            self._send(*pending)

    def _send(self, checkpoint: Position, tables: frozenset[TableName]) -> None:
        try:
            if self._sink is None:
                self._sink = KafkaSink(self.uri, _no_rows, self.changefeed_id)
            topics = {self.uri.topic, *(self._sink.dispatcher.topic(t) for t in tables)}
            self._sink.send_watermark(checkpoint, sorted(topics))
            self._sink.producer.poll()
            self._sent = checkpoint
            self._last_error = ""
        except SinkError as exc:
            if str(exc) != self._last_error:
                self.log.warning(
                    "watermark %s not sent (the next one will be): %s", checkpoint, exc
                )
                self._last_error = str(exc)
            if self._sink is not None:
                self._sink.close()
                self._sink = None
