"""The codec of each Kafka protocol (``cdc.sink.kafka.uri.KafkaProtocol``)."""

from __future__ import annotations

from cdc.sink.kafka.canal import CanalJson
from cdc.sink.kafka.codec import KafkaCodec
from cdc.sink.kafka.debezium import Debezium
from cdc.sink.kafka.uri import KafkaProtocol

__all__ = ["codec_for"]


def codec_for(protocol: KafkaProtocol, changefeed_id: str) -> KafkaCodec:
    """The codec writing ``protocol``; Debezium names its events after the changefeed."""
    if protocol is KafkaProtocol.DEBEZIUM:
        return Debezium(changefeed_id)
    return CanalJson()
