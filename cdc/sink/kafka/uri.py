"""Kafka as the sink: the URI, its protocols and its parameters (TiCDC's Kafka sink URI).

::

    kafka://10.0.0.7:9092,10.0.0.8:9092/cdc-default?protocol=canal-json&partition-num=6
        &max-message-bytes=1MiB&replication-factor=3

* hosts: ``host[:port]`` separated by commas (port 9092 when left out); the
  bootstrap brokers. No user information: SASL is not supported yet, and a
  password in the URI is refused rather than ignored.
* path: the default topic, where rows go unless a dispatcher names another, and
  where schema-level DDL goes.
* ``protocol``: ``canal-json`` (default) or ``debezium`` (``cdc.sink.kafka.protocol``).
* ``partition-num``: partitions of every topic the sink writes (default 3). A
  topic it creates gets this many; an existing topic must have exactly this
  many, since the key-to-partition map depends on it (adding partitions to a
  live topic would move keys and break their order, so it is refused).
* ``max-message-bytes``: the largest Kafka message the sink sends (default
  1MiB, the broker default); larger encoded changes are split into fragments.
* ``replication-factor``: for topics the sink creates (default: the broker's).
* ``dispatchers``: the ``[sink] dispatchers`` of the changefeed file, carried
  here as JSON so that every process that opens the sink sees the same rules
  (``cdc.sink.kafka.dispatch``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cdc.errors import ConfigError
from cdc.sink.kafka.dispatch import DispatchRule, parse_dispatchers, valid_topic
from cdc.sink.kind import NoPassword
from cdc.uri.grammar import (
    ParamCheck,
    check_params,
    int_value,
    parse_query,
    render_query,
    split_scheme,
    suggest,
    with_defaults,
)
from cdc.uri.units import format_size, parse_size

__all__ = [
    "DEFAULT_PARTITIONS",
    "KAFKA_SINK_PARAMS",
    "KafkaProtocol",
    "KafkaSinkURI",
    "parse_kafka_sink",
]

_EXAMPLE = "kafka://127.0.0.1:9092/cdc-events?protocol=canal-json"
_DEFAULT_PORT = 9092
DEFAULT_PARTITIONS = 3
_DEFAULT_MAX_MESSAGE = 1024 * 1024
#: Below this a fragment would hold little more than its own headers.
_MIN_MESSAGE = 4096
#: librdkafka's own ceiling for message.max.bytes.
_MAX_MESSAGE = 1_000_000_000
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


class KafkaProtocol(enum.Enum):
    """How the Kafka sink encodes changes."""

    CANAL_JSON = "canal-json"
    DEBEZIUM = "debezium"


_REFUSED_PROTOCOLS = {
    "open-protocol": "TiCDC's own format, read only by TiCDC tools",
    "avro": "it needs a schema registry, which the sink does not talk to yet",
    "maxwell": "not written by this sink",
    "canal": "Canal's protobuf form; use canal-json",
    "csv": "a storage-sink format; use the file sink for csv",
    "simple": "not written by this sink",
}


def _protocol(value: str, field: str) -> KafkaProtocol:
    name = value.strip().lower()
    choices = [p.value for p in KafkaProtocol]
    try:
        return KafkaProtocol(name)
    except ValueError:
        why = _REFUSED_PROTOCOLS.get(name)
        reason = (
            f"protocol={name} is not supported ({why})" if why else f"unknown protocol {value!r}"
        )
        raise ConfigError(
            field,
            f"{reason}; {suggest(name, choices)}supported: {', '.join(choices)}, "
            "e.g. protocol=canal-json",
        ) from None


def _partitions(value: str, field: str) -> int:
    return int_value(value, field, 1, 10_000, "partition-num=3")


def _replication(value: str, field: str) -> int:
    return int_value(value, field, 1, 100, "replication-factor=3")


def _max_message(value: str, field: str) -> int:
    size = parse_size(value, field=field)
    if not _MIN_MESSAGE <= size <= _MAX_MESSAGE:
        raise ConfigError(
            field,
            f"{value!r} is out of range; between 4KiB and 1GB, and no more than the broker's "
            "message.max.bytes, e.g. max-message-bytes=1MiB",
        )
    return size


def _dispatchers(value: str, field: str) -> tuple[DispatchRule, ...]:
    return parse_dispatchers(value, field)


#: The query parameters of a Kafka sink URI, each with its check.
KAFKA_SINK_PARAMS: Mapping[str, ParamCheck] = MappingProxyType(
    {
        "protocol": _protocol,
        "partition-num": _partitions,
        "max-message-bytes": _max_message,
        "replication-factor": _replication,
        "dispatchers": _dispatchers,
    }
)


@dataclass(frozen=True)
class KafkaSinkURI(NoPassword):
    """Brokers, a default topic and how messages are made and spread."""

    brokers: tuple[str, ...]
    topic: str
    protocol: KafkaProtocol = KafkaProtocol.CANAL_JSON
    partition_num: int = DEFAULT_PARTITIONS
    max_message_bytes: int = _DEFAULT_MAX_MESSAGE
    replication_factor: int | None = None
    dispatchers: tuple[DispatchRule, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def scheme(self) -> str:
        return "kafka"

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` as librdkafka's ``bootstrap.servers`` takes it."""
        return ",".join(self.brokers)

    @property
    def masked(self) -> str:
        return self.unmasked()

    def unmasked(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}{render_query(self.params)}"

    def describe(self) -> dict[str, Any]:
        """The effective settings for printing."""
        return {
            "kind": "kafka",
            "uri": self.masked,
            "brokers": list(self.brokers),
            "topic": self.topic,
            "protocol": self.protocol.value,
            "partition-num": self.partition_num,
            "max-message-bytes": format_size(self.max_message_bytes),
            "replication-factor": self.replication_factor or "broker default",
            "dispatchers": [rule.describe() for rule in self.dispatchers],
        }

    def __str__(self) -> str:
        return self.masked


def _brokers(authority: str, field: str) -> tuple[str, ...]:
    if "@" in authority:
        raise ConfigError(
            field,
            "kafka:// sinks take no user or password (SASL is not supported yet); remove "
            f"everything before '@', e.g. {_EXAMPLE}",
        )
    if not authority:
        raise ConfigError(field, f"no broker given; write kafka://host:port/topic, e.g. {_EXAMPLE}")
    brokers = []
    for item in authority.split(","):
        host, colon, port_text = item.strip().rpartition(":")
        if not colon or host.endswith(":") or (host.count(":") and not host.startswith("[")):
            host, port_text = item.strip(), str(_DEFAULT_PORT)
        if not host or _HOST.fullmatch(host) is None:
            raise ConfigError(
                field, f"{item!r} is not a broker host[:port]; e.g. 127.0.0.1:9092 or kafka-1:9092"
            )
        port = int_value(port_text, field, 1, 65535, "kafka://127.0.0.1:9092/topic")
        brokers.append(f"{host}:{port}")
    return tuple(brokers)


def parse_kafka_sink(text: str, field: str, defaults: Mapping[str, str]) -> KafkaSinkURI:
    """``kafka://host:port[,host:port]/topic?...``; ``defaults`` fill the parameters it lacks."""
    _, rest = split_scheme(text, field, _EXAMPLE)
    location, _, query = rest.partition("?")
    authority, slash, topic = location.partition("/")
    brokers = _brokers(authority, field)
    if not slash or not topic:
        raise ConfigError(field, f"no topic given; the path is the default topic, e.g. {_EXAMPLE}")
    valid_topic(topic, field)
    params = with_defaults(parse_query(query, field, KAFKA_SINK_PARAMS), defaults)
    typed = check_params(params, KAFKA_SINK_PARAMS, field=field)
    settings = {
        attribute: typed[name]
        for name, attribute in (
            ("protocol", "protocol"),
            ("partition-num", "partition_num"),
            ("max-message-bytes", "max_message_bytes"),
            ("replication-factor", "replication_factor"),
            ("dispatchers", "dispatchers"),
        )
        if name in typed
    }
    return KafkaSinkURI(brokers, topic, params=params, **settings)
