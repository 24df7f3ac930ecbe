"""The Kafka sink kind (``kafka://host:port/topic``): see ``cdc.sink.kind``.

Rows (binlog and snapshot chunks alike, the chunks through the sink in each
Spark task) go through :class:`KafkaSink`; the owner writes DDL messages
(``apply_ddl``, through a sink opened for it) and watermarks
(``checkpoint_writer``).

The Kafka client and the sink's machinery are imported by the methods that use them:
parsing a URI (every ``cdcctl`` command that reads a changefeed's configuration) needs
none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cdc.model.schema import TableName, TableSchema
from cdc.sink.kafka.uri import KAFKA_SINK_PARAMS, KafkaSinkURI, parse_kafka_sink
from cdc.sink.kind import CheckpointWriter, SinkCheckFailed, SinkKind

if TYPE_CHECKING:
    from cdc.sink.base import SchemaLookup, Sink

__all__ = ["KAFKA", "KafkaKind"]

_REACH_TIMEOUT = 10.0


class KafkaKind(SinkKind[KafkaSinkURI]):
    """Topics on a Kafka cluster, in canal-json or Debezium messages."""

    name = "kafka"
    schemes = ("kafka",)
    uri_type = KafkaSinkURI
    params = KAFKA_SINK_PARAMS

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> KafkaSinkURI:
        return parse_kafka_sink(text, field, defaults)

    def check_tables(self, uri: KafkaSinkURI, tables: Mapping[TableName, TableSchema]) -> None:
        """Every table has a key to partition by, and every column a form in the protocol."""
        from cdc.sink.kafka.codecs import codec_for

        codec = codec_for(uri.protocol, "check")
        for name, schema in tables.items():
            if not schema.key_columns:
                raise SinkCheckFailed(
                    "filter.rules",
                    f"table {name} has no primary key or NOT NULL unique key, so its rows "
                    "cannot be kept in order by key; add a key or leave the table out",
                )
            try:
                codec.table(schema)
            except ValueError as exc:
                raise SinkCheckFailed(
                    "sink-uri",
                    f"table {name}: {exc}; use another protocol or leave the table out",
                ) from None

    def check_reachable(self, uri: KafkaSinkURI) -> None:
        """The brokers answer, and the default topic, if it exists, has ``partition-num``
        partitions."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": uri.bootstrap, "socket.timeout.ms": 5000})
        try:
            metadata = admin.list_topics(timeout=_REACH_TIMEOUT)
        except KafkaException as exc:
            raise SinkCheckFailed(
                "sink-uri",
                f"cannot reach the Kafka brokers {uri.bootstrap} within {_REACH_TIMEOUT:.0f} s "
                f"({exc.args[0].str()}); check that they run and that the URI's hosts and "
                "ports are right",
            ) from None
        topic = metadata.topics.get(uri.topic)
        if topic is not None and topic.error is None and len(topic.partitions) != uri.partition_num:
            raise SinkCheckFailed(
                "sink-uri",
                f"topic {uri.topic!r} has {len(topic.partitions)} partitions but partition-num is "
                f"{uri.partition_num}; rows are spread by key over partition-num partitions, so "
                f"set partition-num={len(topic.partitions)} or use another topic",
            )

    def open(
        self,
        uri: KafkaSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        from cdc.sink.kafka.sink import KafkaSink

        return KafkaSink(uri, schemas, changefeed_id, writable=writable)

    def checkpoint_writer(self, uri: KafkaSinkURI, changefeed_id: str) -> CheckpointWriter:
        from cdc.sink.kafka.watermarks import KafkaWatermarks

        return KafkaWatermarks(uri, changefeed_id)


KAFKA = KafkaKind()
