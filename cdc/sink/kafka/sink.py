"""The Kafka sink: every row change as one message (or its fragments) in key order.

    write_rows(changes)
      each change: topic and partitioning of its table (dispatch.py)
        an UPDATE that changes the key, partitioned by key: DELETE of the old key
        + INSERT of the new one, each in its key's partition (below)
        value (protocol), key, fragments if too large ──► producer.send
    flush()      producer.flush: every message acknowledged (acks=all) ──► flushed
    apply_ddl    flush, then the DDL to every partition of the topics it concerns, flush
    close        undelivered messages dropped (sent again from the checkpoint)

Durable means acknowledged: ``flushed`` is the highest position handed in once
nothing sent is unacknowledged, and ``flush`` blocks while the broker cannot
be reached. So a checkpoint never passes a message the broker has not taken.

Why an UPDATE that changes the key is split: its two keys hash to two
partitions. Sent whole to the new key's partition, it would come after the old
key's earlier changes only in binlog order, not in the old key's partition: a
consumer applying partitions side by side could apply the old key's insert
after the update removed it. As a DELETE in the old key's partition and an
INSERT in the new one, each key's changes stay in one partition, in order
(TiCDC splits such updates for Kafka sinks for the same reason). Under a
``table`` rule both keys are in one partition, so the UPDATE stays whole.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence

from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.kafka.codec import KafkaCodec, TableEncoder
from cdc.sink.kafka.codecs import codec_for
from cdc.sink.kafka.dispatch import Dispatcher, PartitionBy, key_partition, table_partition
from cdc.sink.kafka.fragments import KIND_HEADER, fragment_budget, split
from cdc.sink.kafka.producer import Headers, KafkaProducer
from cdc.sink.kafka.uri import KafkaSinkURI

__all__ = ["KafkaSink", "ddl_topics"]

_ROW: Headers = [(KIND_HEADER, b"row")]
_DDL: Headers = [(KIND_HEADER, b"ddl")]
_WATERMARK: Headers = [(KIND_HEADER, b"watermark")]


def ddl_topics(dispatcher: Dispatcher, ddl: DdlEvent) -> list[str]:
    """The topics a DDL concerns: its tables' (a rename: both names'), else the default
    topic (schema-level DDL, as TiCDC sends it)."""
    topics = {dispatcher.topic(table) for table in ddl.tables}
    return sorted(topics) if topics else [dispatcher.default_topic]


class KafkaSink(Sink):
    """Writes a changefeed's changes to Kafka (see the module docstring)."""

    def __init__(
        self,
        uri: KafkaSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> None:
        if not isinstance(uri, KafkaSinkURI):
            raise SinkError(
                f"KafkaSink needs a KafkaSinkURI (kafka://host:port/topic), not {uri!r}"
            )
        self.uri = uri
        self.changefeed_id = changefeed_id
        self._schemas = schemas
        self._writable = writable
        self._log = get_logger(__name__, changefeed=changefeed_id, sink="kafka")
        self.codec: KafkaCodec = codec_for(uri.protocol, changefeed_id)
        self.dispatcher = Dispatcher(uri.topic, uri.dispatchers)
        self.producer = KafkaProducer(uri, f"cdc-{changefeed_id}")
        self._id = uuid.uuid4().hex[:12]
        self._seq = 0
        self._encoders: dict[TableName, TableEncoder] = {}
        self._high: Position | None = None
        self._flushed: Position | None = None
        self._closed = False
        self.producer.partitions(uri.topic)

    # --- the Sink interface -------------------------------------------------------------------

    @property
    def flushed(self) -> Position | None:
        if self.producer.outstanding == 0 and not self.producer.failed:
            self._flushed = self._high
        return self._flushed

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        self._check_open()
        self._check_writable()
        now_ms = int(time.time() * 1000)
        high = self._high
        last: TableName | None = None
        for change in changes:
            table = change.table
            if table is not last:  # a batch holds runs of one table: look up once per run
                last = table
                encoder = self._encoder(table)
                topic, by = self.dispatcher.route(table)
                count = self.producer.partitions(topic)
            for part in self._parts(change, encoder, by):
                image = part.row
                key_json = encoder.keys.json(image)
                if by is PartitionBy.KEY:
                    partition = key_partition(table, key_json, count)
                else:
                    partition = table_partition(table, count)
                try:
                    value = encoder.value(part, now_ms)
                except ValueError as exc:
                    raise SinkError(str(exc), f"{topic}[{partition}]") from exc
                self._send(topic, partition, encoder.key(key_json, image), value, _ROW)
            if high is None or change.position.key() > high.key():
                high = self._high = change.position

    def apply_ddl(self, ddl: DdlEvent) -> None:
        self._check_open()
        self._check_writable()
        self.flush()
        self.send_to_all(ddl_topics(self.dispatcher, ddl), self.codec.ddl(ddl, _now()), _DDL)
        self.producer.flush()
        if self._high is None or ddl.position.key() > self._high.key():
            self._high = ddl.position
        self._flushed = self._high

    def flush(self) -> Position | None:
        self._check_open()
        self.producer.flush()
        self._flushed = self._high
        return self._flushed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.producer.close()

    # --- beyond the Sink interface ------------------------------------------------------------

    def send_watermark(self, position: Position, topics: Iterable[str]) -> None:
        """A watermark at ``position`` to every partition of ``topics`` (not waited for)."""
        self._check_open()
        self.send_to_all(topics, self.codec.watermark(position, _now()), _WATERMARK)
        self.producer.poll()

    def send_to_all(self, topics: Iterable[str], value: bytes, kind: Headers) -> None:
        """``value`` to every partition of each of ``topics``."""
        for topic in topics:
            for partition in range(self.producer.partitions(topic)):
                self._send(topic, partition, None, value, kind)

    # --- internals ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SinkError("the Kafka sink is closed", self.uri.masked)

    def _check_writable(self) -> None:
        if self._writable is not None and not self._writable():
            raise SinkError("the capture may have lost its lease: writing nothing to Kafka")

    def _encoder(self, table: TableName) -> TableEncoder:
        try:
            schema = self._schemas(table)
        except LookupError as exc:
            raise SinkError(f"no schema for {table}: {exc}") from exc
        encoder = self._encoders.get(table)
        if encoder is None or encoder.schema is not schema and encoder.schema != schema:
            if not isinstance(schema, TableSchema) or schema.name != table:
                raise SinkError(f"the schema lookup for {table} returned {schema!r:.120}")
            try:
                encoder = self._encoders[table] = self.codec.table(schema)
            except ValueError as exc:
                raise SinkError(str(exc)) from exc
        return encoder

    @staticmethod
    def _parts(change: RowChange, encoder: TableEncoder, by: PartitionBy) -> list[RowChange]:
        """``change``, or the DELETE and INSERT an UPDATE that moves its key becomes."""
        if change.op is not Op.UPDATE or by is not PartitionBy.KEY:
            return [change]
        before, after = change.row_before, change.row_after
        names = encoder.keys.names
        if all(before[n] == after[n] for n in names):
            return [change]
        old_key = tuple(before[n] for n in names)
        new_key = tuple(after[n] for n in names)
        common = (change.position, change.txn_id, change.schema_version)
        return [
            RowChange(change.table, Op.DELETE, before, None, old_key, *common),
            RowChange(change.table, Op.CREATE, None, after, new_key, *common),
        ]

    def _send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes,
        kind: Headers,
    ) -> None:
        budget = fragment_budget(self.uri.max_message_bytes, key)
        if len(value) <= budget:
            self.producer.send(topic, partition, key, value, kind)
            return
        self._seq += 1
        message_id = f"{self._id}.{self._seq}"
        for piece, header in split(value, budget, message_id):
            assert header is not None
            self.producer.send(topic, partition, key, piece, [*kind, header])


def _now() -> int:
    return int(time.time() * 1000)
